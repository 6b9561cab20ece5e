//! The request-count report of the aws backends: S3 and DynamoDB requests
//! per operation (checkpoint, resolve, show, history(50), materialize cold
//! and warm) at chain depth 1 / 100 / 1,000, and 1,000 with 3 forks on the
//! path; and erasing a session of that many commits; with the small deltas
//! inline with their commits (the default) and in S3; a branch create and
//! return (SC-002) with that many commits in the branch and memories to
//! search. Counts come from an SDK interceptor; they do not depend on speed.
//!
//! Then the time of one session erase at depth 1,000 (quick: 100) on the
//! emulator, with the erase working on one commit at a time (as before)
//! and on 16 at once (the default): the same requests, fewer in a row.
//!
//! Needs the emulator: `eval "$(localstack/emulator start)"`, then
//! `cargo bench -p ctx-core --features aws --bench aws_requests`
//! (`-- --quick` for depths 1 and 100 only).

use ctx_core::config::Config;
use ctx_core::store::aws::report::{
    branch_request_counts, erase_request_counts, erase_times, request_counts,
};

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let config = Config::from_env()
        .and_then(|c| c.aws())
        .expect("start the emulator first: eval \"$(localstack/emulator start)\"");
    let mut rows = Vec::new();
    let depths: &[u64] = if quick { &[1, 100] } else { &[1, 100, 1000] };
    let forked: &[u64] = if quick { &[100] } else { &[1000] };
    let erased: &[u64] = if quick { &[1, 100] } else { &[1, 100, 1000] };
    // Small deltas inline with their commits (the default), then in S3
    // (CTX_INLINE_DELTA_BYTES=0), as before inline deltas existed.
    for inline in [true, false] {
        rows.extend(
            request_counts(&config, depths, 0, inline)
                .await
                .expect("report"),
        );
        rows.extend(
            request_counts(&config, forked, 3, inline)
                .await
                .expect("report"),
        );
        rows.extend(
            erase_request_counts(&config, erased, inline)
                .await
                .expect("report"),
        );
    }
    // SC-002 as counts: a branch create and return (the depth is the
    // branch's commits and the memories there are to search).
    rows.extend(
        branch_request_counts(&config, if quick { &[1, 100] } else { &[1, 100, 1000] })
            .await
            .expect("report"),
    );
    println!("| operation | deltas | depth | forks | S3 requests | DynamoDB requests | total |");
    println!("|---|---|---:|---:|---|---|---:|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.op,
            if r.inline { "inline" } else { "S3" },
            r.depth,
            r.forks,
            r.describe("s3"),
            r.describe("dynamodb"),
            r.total("s3") + r.total("dynamodb")
        );
    }
    let depth = if quick { 100 } else { 1000 };
    println!(
        "\n| erase session, deltas inline, emulator | commits | commits at once | requests | ms |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (n, took, requests) in erase_times(&config, depth, &[1, 16])
        .await
        .expect("erase times")
    {
        println!(
            "| {} | {} | {n} | {requests} | {} |",
            if n == 1 {
                "one at a time (before)"
            } else {
                "many at once"
            },
            depth + 1,
            took.as_millis()
        );
    }
}
