//! `ctx serve` under hostile clients: idle and slow connections beyond the
//! connection cap, slow heads and bodies, and concurrent large bodies
//! beyond the in-flight budget. Each test runs its own server with small
//! limits and talks raw TCP where a client library would be too polite.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use ctx_tests::Server;

fn connect(server: &Server) -> TcpStream {
    let addr = server.url.trim_start_matches("http://");
    TcpStream::connect(addr).expect("connect to ctx serve")
}

/// Whether the server has closed `s` (read end of stream or reset),
/// reading and dropping whatever it sent first.
fn closed(s: &mut TcpStream) -> bool {
    s.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// Polls until `pred` holds for at least `want` of `streams`, or the
/// deadline; returns how many it held for.
fn wait_closed(streams: &mut [TcpStream], want: usize, within: Duration) -> usize {
    let deadline = Instant::now() + within;
    let mut done = vec![false; streams.len()];
    loop {
        for (s, d) in streams.iter_mut().zip(done.iter_mut()) {
            *d = *d || closed(s);
        }
        let n = done.iter().filter(|d| **d).count();
        if n >= want || Instant::now() >= deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// GET /healthz with a deadline of its own; how long it took.
async fn healthz(server: &Server) -> Duration {
    let start = Instant::now();
    let resp = reqwest::Client::new()
        .get(format!("{}/healthz", server.url))
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("/healthz answers");
    assert!(resp.status().is_success(), "{}", resp.status());
    start.elapsed()
}

#[tokio::test]
async fn idle_connections_beyond_the_cap_make_way_for_new_ones() {
    let dir = tempfile::tempdir().unwrap();
    // Timeouts far beyond the test: only the cap can free slots.
    let server = Server::start_env(
        dir.path(),
        &["--store", "memory"],
        &[
            ("CTX_MAX_CONNECTIONS", "32"),
            ("CTX_IDLE_TIMEOUT_SECS", "600"),
            ("CTX_HEADER_READ_TIMEOUT_SECS", "600"),
        ],
    );
    let mut idle: Vec<TcpStream> = (0..100).map(|_| connect(&server)).collect();
    let took = healthz(&server).await;
    assert!(
        took < Duration::from_secs(5),
        "/healthz took {took:?} behind 100 idle connections with a cap of 32"
    );
    // 101 clients through 32 slots: at least 69 idle ones were closed.
    let n = wait_closed(&mut idle, 69, Duration::from_secs(10));
    assert!(n >= 69, "only {n} of 100 idle connections were closed");
    assert!(
        n < 100,
        "all {n} were closed: the newest should still be open"
    );
    server.kill();
}

#[tokio::test]
async fn idle_slow_head_and_slow_body_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_env(
        dir.path(),
        &["--store", "memory"],
        &[
            ("CTX_IDLE_TIMEOUT_SECS", "1"),
            ("CTX_HEADER_READ_TIMEOUT_SECS", "2"),
            ("CTX_BODY_READ_TIMEOUT_SECS", "2"),
        ],
    );
    let opened = Instant::now();
    let mut idle: Vec<TcpStream> = (0..100).map(|_| connect(&server)).collect();
    let mut slow_head: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut s = connect(&server);
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: ctx\r\nX-Slow: ")
                .unwrap();
            s
        })
        .collect();
    let mut slow_body: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = connect(&server);
            let head = format!(
                "POST /v1/artifacts HTTP/1.1\r\nHost: ctx\r\nAuthorization: Bearer {}\r\n\
                 Content-Length: 1000\r\n\r\n0123456789",
                server.token
            );
            s.write_all(head.as_bytes()).unwrap();
            s
        })
        .collect();
    // A keep-alive connection that made one request and then went quiet.
    let mut kept = connect(&server);
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: ctx\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 12];
    kept.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200");

    let took = healthz(&server).await;
    assert!(
        took < Duration::from_secs(1),
        "/healthz took {took:?} beside 171 idle or slow connections"
    );
    let all = idle.len();
    let n = wait_closed(&mut idle, all, Duration::from_secs(10));
    assert_eq!(n, idle.len(), "idle connections left open");
    assert!(wait_closed(std::slice::from_mut(&mut kept), 1, Duration::from_secs(10)) == 1);
    let all = slow_head.len();
    let n = wait_closed(&mut slow_head, all, Duration::from_secs(10));
    assert_eq!(n, slow_head.len(), "slow-head connections left open");
    let all = slow_body.len();
    let n = wait_closed(&mut slow_body, all, Duration::from_secs(10));
    assert_eq!(n, slow_body.len(), "slow-body connections left open");
    // Nothing above closed before its timeout could have fired.
    assert!(opened.elapsed() >= Duration::from_secs(2));
    let took = healthz(&server).await;
    assert!(
        took < Duration::from_secs(1),
        "/healthz took {took:?} after"
    );
    server.kill();
}

/// Starts an upload of `len` bytes that declares its length and waits for
/// `100 Continue`: the server has then admitted it (reserved its length)
/// and is reading its body, of which nothing is sent yet.
fn held_upload(server: &Server, len: usize) -> TcpStream {
    let mut s = connect(server);
    let head = format!(
        "POST /v1/artifacts HTTP/1.1\r\nHost: ctx\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {len}\r\n\
         Expect: 100-continue\r\n\r\n",
        server.token
    );
    s.write_all(head.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = [0u8; 25];
    s.read_exact(&mut buf).expect("100 Continue");
    assert_eq!(&buf, b"HTTP/1.1 100 Continue\r\n\r\n");
    s
}

/// Sends the rest of a held upload and reads its status code.
fn finish_upload(mut s: TcpStream, body: &[u8]) -> u16 {
    s.write_all(body).unwrap();
    let mut buf = [0u8; 12];
    s.read_exact(&mut buf).unwrap();
    std::str::from_utf8(&buf[9..12]).unwrap().parse().unwrap()
}

#[tokio::test]
async fn bodies_beyond_the_in_flight_budget_get_503_and_write_nothing() {
    const MB: usize = 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_env(
        dir.path(),
        &["--store", "memory"],
        &[("CTX_MAX_IN_FLIGHT_BYTES", "3000000")],
    );
    // Two uploads of 1.4 MB in flight: 2.8 of the 3 MB budget.
    let held: Vec<TcpStream> = (0..2).map(|_| held_upload(&server, 1_400_000)).collect();

    let upload = |body: Vec<u8>| {
        reqwest::Client::new()
            .post(format!("{}/v1/artifacts", server.url))
            .bearer_auth(&server.token)
            .body(body)
            .send()
    };
    let bodies: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; MB]).collect();
    let refused = futures_join(bodies.iter().map(|b| upload(b.clone()))).await;
    for resp in refused {
        let resp = resp.expect("the server answers");
        assert_eq!(resp.status().as_u16(), 503);
        assert_eq!(
            resp.headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()),
            Some("1")
        );
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["kind"], "unavailable", "{body}");
    }
    // A small body still fits beside the held ones.
    let resp = upload(vec![9; 100_000]).await.unwrap();
    assert_eq!(resp.status().as_u16(), 201);

    for (i, s) in held.into_iter().enumerate() {
        let i = u8::try_from(i).unwrap();
        assert_eq!(finish_upload(s, &vec![100 + i; 1_400_000]), 201);
    }
    // The refused bodies were never stored: each is new now.
    let admitted = futures_join(bodies.iter().take(2).map(|b| upload(b.clone()))).await;
    for resp in admitted {
        assert_eq!(resp.unwrap().status().as_u16(), 201, "created, not 200");
    }
    server.kill();
}

/// Runs the futures concurrently and collects their outputs in order.
async fn futures_join<F: std::future::Future + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("the request task does not panic"));
    }
    out
}
