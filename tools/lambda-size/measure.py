#!/usr/bin/env python3
"""Package size and cold init of each ctx Lambda, as Lambda runs them.

For every function of template.yaml (its `BuildProperties.Binary`):

1. takes the binary (built by `--build`, or found in `--bin-dir`), strips
   its symbols as `cargo lambda build --release` does (`strip=symbols`;
   `--no-strip` keeps them) and packages it as Lambda's provided.al2023
   runtime takes it: one executable file `bootstrap` in a zip (deflate);
   reports the zip's size and the unzipped size against Lambda's limits
   (50 MB zipped for a direct upload, 250 MB unzipped);
2. unzips it into a fresh task directory and starts `bootstrap` as the
   Lambda runtime would: `AWS_LAMBDA_RUNTIME_API` pointing at a Lambda
   Runtime API server on 127.0.0.1 written in this tool (GET
   /2018-06-01/runtime/invocation/next, POST .../{id}/response,
   .../{id}/error and /2018-06-01/runtime/init/error, as the Runtime API
   documents them), the variables Lambda sets (function name, memory,
   region, `_HANDLER`, `LAMBDA_TASK_ROOT`, credentials, ...), and the
   function's environment from template.yaml (its Globals and its own,
   parameters at their defaults, CTX_BUCKET and CTX_TABLE from the
   environment when the emulator's exports are there);
3. times spawn -> the first GET /next (init), then hands it one small
   event and times the first answer: for a function behind API Gateway an
   HTTP API v2 event for one of its routes with no JWT claims (answered
   401 before any storage call), for `branch-expire` and `summarizer` an
   event they refuse before any storage call (answered on /error). Each
   answer is checked; the peak RSS of the process (VmHWM) is read when it
   answers. Repeated `--runs` times; the medians are reported.

What this measures and what it does not: the process's own cold start
(loading the executable, reading the configuration, building the SDK
clients and the router, connecting to the Runtime API) and its first
invocation. Lambda's real cold start adds the sandbox (a Firecracker
micro-VM), downloading and unpacking the package, and the runtime's own
start; none of that is here, and no Docker or AWS runtime interface
emulator is needed. The machine here is x86_64 while template.yaml
deploys arm64, and cargo-lambda's release build also sets lto="thin",
codegen-units=1 and panic="abort" (not set here): sizes are close to,
not equal to, what `sam build` uploads.

    tools/lambda-size/measure.py --build              # release build, 5 runs
    tools/lambda-size/measure.py --build --debug --runs 1 --zip-level 0   # smoke
    tools/lambda-size/measure.py --build --markdown   # the table of docs/bench.md

`--build` runs `cargo build --release --locked --bin <each>` at the
workspace root, which is what `sam build` (`cargo lambda build --release
--bin <Binary>`) does: cargo resolves the features of the workspace's
default members, not of the function's crate alone.

Exits non-zero when a package is over a limit or a function does not
answer as expected. Python 3.11 and PyYAML (which localstack/.venv has).
"""

from __future__ import annotations

import argparse
import copy
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

try:
    import yaml
except ImportError:  # pragma: no cover - said, not hidden
    sys.exit("lambda-size: needs PyYAML (localstack/.venv/bin/python has it)")

ROOT = Path(__file__).resolve().parent.parent.parent
TEMPLATE = ROOT / "template.yaml"
APIGW_EVENT = ROOT / "tests" / "data" / "apigw" / "resolve-no-claims.json"

MB = 1_000_000
MIB = 1024 * 1024
# Lambda's deployment package limits (zip, direct upload; unzipped).
ZIPPED_LIMIT = 50 * MIB
UNZIPPED_LIMIT = 250 * MIB
API = "/2018-06-01/runtime"
REGION = "us-east-1"
ACCOUNT = "123456789012"
STACK = "ctx"


# ---------------------------------------------------------------------------
# template.yaml


class _Loader(yaml.SafeLoader):
    """Reads CloudFormation's short tags (`!Ref X` -> {"Ref": X}, ...)."""


def _tag(loader, suffix, node):
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_Loader.add_multi_constructor("!", _tag)


@dataclass
class Function:
    """A function of template.yaml, as this tool runs it."""

    logical: str
    binary: str
    memory: int
    timeout: int
    env: dict[str, str]
    # (method, path) of its API Gateway routes; empty when invoked directly.
    routes: list[tuple[str, str]] = field(default_factory=list)


def _resolve(value, params: dict[str, str]) -> str:
    """A template value as Lambda would see it, parameters at their
    defaults, the stack's own names made up (account 123456789012,
    region us-east-1, stack ctx)."""
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, dict) and "Ref" in value:
        ref = value["Ref"]
        if ref in params:
            return params[ref]
        return f"{STACK}-{ref}".lower()
    if isinstance(value, dict) and "Fn::Sub" in value:
        out = value["Fn::Sub"]
        for k, v in {
            "AWS::Partition": "aws",
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::StackName": STACK,
        }.items():
            out = out.replace("${" + k + "}", v)
        return out
    raise ValueError(f"template.yaml: cannot resolve the environment value {value!r}")


def read_template(
    path: Path = TEMPLATE, overrides: dict[str, str] | None = None
) -> list[Function]:
    """Every function of the template with a `BuildProperties.Binary`, its
    parameters at their defaults but for `overrides` (as `sam deploy
    --parameter-overrides` gives them)."""
    doc = yaml.load(path.read_text(), Loader=_Loader)
    params = {
        name: str(p.get("Default", "")) for name, p in doc.get("Parameters", {}).items()
    }
    for name, value in (overrides or {}).items():
        if name not in params:
            raise ValueError(f"template.yaml has no parameter {name}")
        params[name] = value
    glob = doc.get("Globals", {}).get("Function", {})
    genv = glob.get("Environment", {}).get("Variables", {})
    out = []
    for logical, res in doc["Resources"].items():
        if res.get("Type") != "AWS::Serverless::Function":
            continue
        binary = res.get("Metadata", {}).get("BuildProperties", {}).get("Binary")
        if not binary:
            continue
        props = res.get("Properties", {})
        env = {k: _resolve(v, params) for k, v in genv.items()}
        env.update(
            {
                k: _resolve(v, params)
                for k, v in props.get("Environment", {}).get("Variables", {}).items()
            }
        )
        routes = [
            (e["Properties"]["Method"].upper(), e["Properties"]["Path"])
            for e in props.get("Events", {}).values()
            if e.get("Type") == "HttpApi"
        ]
        out.append(
            Function(
                logical=logical,
                binary=binary,
                memory=int(props.get("MemorySize", glob.get("MemorySize", 128))),
                timeout=int(props.get("Timeout", glob.get("Timeout", 3))),
                env=env,
                routes=routes,
            )
        )
    return out


# ---------------------------------------------------------------------------
# Packaging


def package(binary: Path, out_dir: Path, strip: bool, level: int) -> Path:
    """`bootstrap.zip` in `out_dir`: the binary (stripped of its symbols
    unless `strip` is false) as one executable file `bootstrap`, deflated
    at `level` (0: stored)."""
    bootstrap = out_dir / "bootstrap"
    shutil.copyfile(binary, bootstrap)
    if strip:
        subprocess.run(["strip", "--strip-all", str(bootstrap)], check=True)
    zpath = out_dir / "bootstrap.zip"
    info = zipfile.ZipInfo("bootstrap", date_time=(2026, 1, 1, 0, 0, 0))
    info.create_system = 3  # Unix, so that the mode below is read
    info.external_attr = 0o100755 << 16  # a regular, executable file
    # Level 0 stores (a smoke run's shortcut: sizes then say nothing).
    info.compress_type = zipfile.ZIP_DEFLATED if level else zipfile.ZIP_STORED
    with zipfile.ZipFile(zpath, "w", compresslevel=level or None) as z, bootstrap.open("rb") as src:
        with z.open(info, "w", force_zip64=True) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    bootstrap.unlink()
    return zpath


def unzipped_size(zpath: Path) -> int:
    with zipfile.ZipFile(zpath) as z:
        return sum(i.file_size for i in z.infolist())


def unpack(zpath: Path, task_root: Path) -> Path:
    """Unzips as Lambda does into `task_root`, keeping the mode bits."""
    with zipfile.ZipFile(zpath) as z:
        for info in z.infolist():
            target = Path(z.extract(info, task_root))
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                target.chmod(mode)
    return task_root / "bootstrap"


# ---------------------------------------------------------------------------
# The Lambda Runtime API


class Invocation:
    """One cold start: the event handed out, and when each step came."""

    def __init__(self, event: bytes, deadline_s: int):
        self.event = event
        self.deadline_s = deadline_s
        self.request_id = str(uuid.uuid4())
        self.spawned = 0.0
        self.first_next = None  # perf_counter of the first GET /next
        self.handed = None  # when its event went out
        self.answered = None  # when /response or /error came
        self.kind = None  # "response" | "error" | "init-error"
        self.body = b""
        self.done = threading.Event()
        self.stop = threading.Event()  # releases a held second /next
        self.lock = threading.Lock()


class RuntimeApi(http.server.ThreadingHTTPServer):
    """The Lambda Runtime API on 127.0.0.1, serving one invocation at a
    time (`self.invocation`)."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.invocation: Invocation | None = None

    def handle_error(self, request, client_address):
        # A process killed at the end of its run drops its connections.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)

    @property
    def address(self) -> str:
        host, port = self.server_address[:2]
        return f"{host}:{port}"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the runtime clients expect

    def log_message(self, *args):  # quiet
        pass

    def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))

    def do_GET(self):
        inv = self.server.invocation
        if self.path != f"{API}/invocation/next" or inv is None:
            return self._reply(404, b'{"errorType":"NotFound"}')
        now = time.perf_counter()
        with inv.lock:
            first = inv.first_next is None
            if first:
                inv.first_next = now
        if not first:
            # The next event never comes: Lambda would freeze the process
            # here. Hold the request until the run is over.
            inv.stop.wait(600)
            return self._reply(410, b'{"errorType":"Done"}')
        deadline_ms = int((time.time() + inv.deadline_s) * 1000)
        inv.handed = time.perf_counter()
        self._reply(
            200,
            inv.event,
            {
                "Lambda-Runtime-Aws-Request-Id": inv.request_id,
                "Lambda-Runtime-Deadline-Ms": str(deadline_ms),
                "Lambda-Runtime-Invoked-Function-Arn": (
                    f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{STACK}-measured"
                ),
                "Lambda-Runtime-Trace-Id": "Root=1-00000000-000000000000000000000000;Sampled=0",
            },
        )

    def do_POST(self):
        inv = self.server.invocation
        body = self._body()
        now = time.perf_counter()
        kind = None
        if inv is not None:
            if self.path == f"{API}/init/error":
                kind = "init-error"
            elif self.path == f"{API}/invocation/{inv.request_id}/response":
                kind = "response"
            elif self.path == f"{API}/invocation/{inv.request_id}/error":
                kind = "error"
        if kind is None:
            return self._reply(404, b'{"errorType":"NotFound"}')
        with inv.lock:
            if inv.kind is None:
                inv.kind, inv.body, inv.answered = kind, body, now
        self._reply(202, b'{"status":"OK"}')
        inv.done.set()


# ---------------------------------------------------------------------------
# Events and expected answers


def apigw_event(method: str, path: str) -> bytes:
    """An HTTP API (payload 2.0) event for `method path` with no JWT
    claims: any value in each `{param}`."""
    event = json.loads(APIGW_EVENT.read_text())
    params = {}
    raw = []
    for seg in path.strip("/").split("/"):
        if seg.startswith("{"):
            name = seg.strip("{}+")
            params[name] = "x"
            raw.append("x")
        else:
            raw.append(seg)
    raw_path = "/" + "/".join(raw)
    route = f"{method} {path}"
    event.update(routeKey=route, rawPath=raw_path, rawQueryString="")
    event.pop("queryStringParameters", None)
    if params:
        event["pathParameters"] = params
    ctx = event["requestContext"]
    ctx["routeKey"] = route
    ctx["http"] = dict(ctx["http"], method=method, path=raw_path)
    if method in ("POST", "PUT", "PATCH"):
        event["body"] = "{}"
        event["headers"] = dict(event["headers"], **{"content-type": "application/json"})
    return json.dumps(event).encode()


def event_for(f: Function) -> tuple[bytes, str]:
    """The event handed to `f` and a description of the answer expected."""
    if f.routes:
        gets = [r for r in f.routes if r[0] == "GET"]
        method, path = (gets or f.routes)[0]
        return apigw_event(method, path), f"401 to {method} {path}"
    if f.binary == "summarizer":
        # An API Gateway event: refused before any storage call.
        return APIGW_EVENT.read_bytes(), "refused (not a scheduled event)"
    # branch-expire: not a branch timer input.
    return b"{}", "refused (not a timer input)"


def check_answer(f: Function, inv: Invocation) -> str | None:
    """None when `inv` answered as expected, else what went wrong."""
    if inv.kind is None:
        return "no answer"
    body = inv.body.decode(errors="replace")
    if inv.kind == "init-error":
        return f"init error: {body}"
    if f.routes:
        if inv.kind != "response":
            return f"an error instead of a response: {body}"
        status = json.loads(body).get("statusCode")
        return None if status == 401 else f"status {status}, expected 401: {body[:300]}"
    if inv.kind != "error":
        return f"answered instead of refusing: {body[:300]}"
    return None


# ---------------------------------------------------------------------------
# Cold starts


def lambda_env(f: Function, api: str, task_root: Path) -> dict[str, str]:
    """What Lambda puts in a provided.al2023 function's environment, then
    the function's own variables (template.yaml)."""
    env = {
        "AWS_LAMBDA_RUNTIME_API": api,
        "AWS_LAMBDA_FUNCTION_NAME": f"{STACK}-{f.logical}",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(f.memory),
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{STACK}-{f.logical}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "2026/01/01/[$LATEST]00000000000000000000000000000000",
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "AKIDLAMBDASIZE",
        "AWS_SECRET_ACCESS_KEY": "lambda-size",
        "AWS_SESSION_TOKEN": "lambda-size",
        "_HANDLER": "bootstrap",
        "LAMBDA_TASK_ROOT": str(task_root),
        "LAMBDA_RUNTIME_DIR": str(task_root),
        "LANG": "en_US.UTF-8",
        "TZ": ":UTC",
        "PATH": "/usr/local/bin:/usr/bin/:/bin",
    }
    env.update(f.env)
    # The resources: the emulator's, when its exports are here.
    for k in ("CTX_BUCKET", "CTX_TABLE"):
        if os.environ.get(k):
            env[k] = os.environ[k]
    for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        if os.environ.get(k):
            env[k] = os.environ[k]
    return env


def peak_rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as s:
            for line in s:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


@dataclass
class Run:
    init_ms: float
    invoke_ms: float
    total_ms: float
    rss_mib: float | None


def cold_start(f: Function, bootstrap: Path, timeout: float) -> Run:
    """Starts `bootstrap` once, hands it its event, and times it, on a
    Runtime API of its own: a request an earlier run's runtime sent before
    it was killed can reach a shared one after the next run began, and take
    that run's event.

    Raises RuntimeError when it does not answer as expected in time."""
    event, _ = event_for(f)
    inv = Invocation(event, f.timeout)
    api = RuntimeApi()
    threading.Thread(target=api.serve_forever, daemon=True).start()
    api.invocation = inv
    log = tempfile.TemporaryFile()
    env = lambda_env(f, api.address, bootstrap.parent)
    inv.spawned = time.perf_counter()
    proc = subprocess.Popen(
        [str(bootstrap)], cwd=bootstrap.parent, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        end = time.monotonic() + timeout
        while not inv.done.wait(0.05):
            if proc.poll() is not None or time.monotonic() > end:
                break
        rss = peak_rss_mib(proc.pid)
        problem = check_answer(f, inv)
        if problem is None and inv.first_next is None:
            problem = "answered without asking for an event"
        if problem:
            log.seek(0)
            out = log.read().decode(errors="replace")[-2000:]
            state = f"exited {proc.returncode}" if proc.poll() is not None else "still running"
            raise RuntimeError(f"{f.binary}: {problem} ({state}); its output:\n{out}")
        return Run(
            init_ms=(inv.first_next - inv.spawned) * 1000,
            invoke_ms=(inv.answered - inv.handed) * 1000,
            total_ms=(inv.answered - inv.spawned) * 1000,
            rss_mib=rss,
        )
    finally:
        inv.stop.set()
        proc.kill()
        proc.wait()
        log.close()
        api.invocation = None
        api.shutdown()
        api.server_close()


# ---------------------------------------------------------------------------
# Reporting


@dataclass
class Result:
    function: Function
    binary_bytes: int
    zipped: int
    unzipped: int
    runs: list[Run]
    expected: str

    def median(self, attr: str) -> float | None:
        values = [getattr(r, attr) for r in self.runs if getattr(r, attr) is not None]
        return statistics.median(values) if values else None


def mb(n: int) -> str:
    return f"{n / MB:.1f}"


def ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def table(results: list[Result], markdown: bool) -> str:
    head = [
        "function",
        "binary MB",
        "zip MB",
        "zip / 50 MiB",
        "unzipped MB",
        "unzipped / 250 MiB",
        "init ms",
        "first answer ms",
        "spawn to answer ms",
        "peak RSS MiB",
    ]
    rows = []
    for r in results:
        rows.append(
            [
                r.function.binary,
                mb(r.binary_bytes),
                mb(r.zipped),
                f"{100 * r.zipped / ZIPPED_LIMIT:.0f}%",
                mb(r.unzipped),
                f"{100 * r.unzipped / UNZIPPED_LIMIT:.0f}%",
                ms(r.median("init_ms")),
                ms(r.median("invoke_ms")),
                ms(r.median("total_ms")),
                ms(r.median("rss_mib")),
            ]
        )
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    fmt = lambda row: "  ".join(  # noqa: E731
        c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))
    )
    return "\n".join([fmt(head)] + [fmt(row) for row in rows])


# ---------------------------------------------------------------------------


def build(functions: list[Function], target_dir: Path, release: bool) -> Path:
    """`cargo build --release --locked --bin ...` at the workspace root,
    as `cargo lambda build --release --bin <Binary>` does (`release`
    false: a debug build)."""
    cmd = ["cargo", "build", "--locked"] + (["--release"] if release else [])
    for f in functions:
        cmd += ["--bin", f.binary]
    print("lambda-size: " + " ".join(cmd), file=sys.stderr, flush=True)
    env = dict(os.environ, CARGO_TARGET_DIR=str(target_dir))
    subprocess.run(cmd, cwd=ROOT, check=True, env=env)
    return target_dir / ("release" if release else "debug")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group()
    src.add_argument("--build", action="store_true", help="cargo build --release the functions first")
    src.add_argument("--bin-dir", type=Path, help="take the binaries from here (default: <target>/release)")
    p.add_argument("--debug", action="store_true", help="with --build: a debug build (a smoke run)")
    p.add_argument("--functions", help="a comma-separated subset (binary names)")
    p.add_argument("--runs", type=int, default=5, help="cold starts per function (0: sizes only)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds a cold start may take")
    p.add_argument("--zip-level", type=int, default=6, choices=range(10), metavar="0-9",
                   help="deflate level (zlib's default: 6; 0 stores, for a quick smoke run)")
    p.add_argument("--no-strip", action="store_true", help="package the binary with its symbols")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = p.parse_args(argv)

    functions = read_template()
    if args.functions:
        wanted = args.functions.split(",")
        unknown = set(wanted) - {f.binary for f in functions}
        if unknown:
            p.error(f"not a function of template.yaml: {', '.join(sorted(unknown))}")
        functions = [f for f in functions if f.binary in wanted]
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    if args.build:
        bin_dir = build(functions, target, release=not args.debug)
    else:
        bin_dir = args.bin_dir or target / "release"

    results = []
    failed = []
    with tempfile.TemporaryDirectory(prefix="lambda-size-") as tmp:
        for f in functions:
            binary = bin_dir / f.binary
            if not binary.is_file():
                failed.append(f"{f.binary}: no binary at {binary}")
                continue
            work = Path(tmp) / f.binary
            work.mkdir()
            zpath = package(binary, work, strip=not args.no_strip, level=args.zip_level)
            result = Result(
                function=f,
                binary_bytes=binary.stat().st_size,
                zipped=zpath.stat().st_size,
                unzipped=unzipped_size(zpath),
                runs=[],
                expected=event_for(f)[1],
            )
            # A stored zip (level 0) says nothing of the deflated size.
            over_zipped = args.zip_level > 0 and result.zipped > ZIPPED_LIMIT
            if over_zipped or result.unzipped > UNZIPPED_LIMIT:
                failed.append(
                    f"{f.binary}: {mb(result.zipped)} MB zipped, {mb(result.unzipped)} MB"
                    " unzipped: over Lambda's limits"
                )
            for i in range(args.runs):
                task_root = work / f"task-{i}"
                bootstrap = unpack(zpath, task_root)
                try:
                    result.runs.append(cold_start(f, bootstrap, args.timeout))
                except RuntimeError as e:
                    failed.append(str(e))
                    break
                finally:
                    shutil.rmtree(task_root, ignore_errors=True)
            zpath.unlink()
            results.append(result)
            print(
                f"lambda-size: {f.binary}: {mb(result.zipped)} MB zipped,"
                f" {len(result.runs)} cold starts ({result.expected})",
                file=sys.stderr,
                flush=True,
            )

    print(table(results, args.markdown))
    if args.runs:
        print(
            f"\nMedians of {args.runs} cold starts; MB = 10^6 bytes; limits: "
            f"{ZIPPED_LIMIT // MIB} MiB zipped, {UNZIPPED_LIMIT // MIB} MiB unzipped; "
            f"{'symbols kept' if args.no_strip else 'stripped as cargo lambda --release does'}"
            f"{'; stored, not deflated: zip sizes are not meaningful' if args.zip_level == 0 else ''}."
        )
    for problem in failed:
        print(f"FAIL  {problem}", file=sys.stderr)
    ok = len(functions) - len({p.split(":")[0] for p in failed})
    print(f"lambda-size: {ok} passed, {len(functions) - ok} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
