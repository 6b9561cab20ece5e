"""Runs Google ADK's own session-service tests against ``CtxSessionService``.

    python tools/run_adk_suite.py ADK_CHECKOUT [--ctx CTX_BINARY] [pytest args...]

``ADK_CHECKOUT`` is a checkout of google/adk-python (at the tag of the
pinned google-adk). Its ``tests/unittests/sessions/test_session_service.py``
runs as it ships, with pytest from the checkout's directory (its own pytest
settings), and the plugin :mod:`adk_suite_plugin` registers a ``ctx``
backend in the suite's ``_conformance`` registry, so every contract test
(those taking ``session_service``) runs against a live ``ctx serve``; the
module's other tests exercise ADK's own services as they ship. Neither file
holds any of ADK's code.

The server is the one at ``CTX_TEST_URL`` with ``CTX_TEST_TOKEN``, or, with
``--ctx``, a ``ctx serve`` this script starts on embedded storage in a
temporary directory and stops at the end. A skipped test fails the run.
The exit status is pytest's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUITE = Path("tests") / "unittests" / "sessions" / "test_session_service.py"


def _serve(ctx: str, data: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    out = data.parent / "serve.out"
    with out.open("wb") as sink:
        server = subprocess.Popen(
            [ctx, "serve", "--data", str(data), "--addr", "127.0.0.1:0"],
            stdout=sink,
            stderr=subprocess.DEVNULL,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = re.search(r"^ctx listening on (http:\S+)$", out.read_text(), re.M)
        if m:
            return server, m.group(1), (data / "token").read_text().strip()
        if server.poll() is not None:
            raise SystemExit(f"ctx serve exited with {server.returncode}")
        time.sleep(0.1)
    server.kill()
    raise SystemExit("ctx serve did not start listening within 30 s")


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    checkout = Path(argv[0]).resolve()
    rest = argv[1:]
    if not (checkout / SUITE).exists():
        print(f"{checkout / SUITE} does not exist: not an adk-python checkout", file=sys.stderr)
        return 2
    ctx = None
    if rest[:1] == ["--ctx"] and len(rest) >= 2:
        ctx, rest = rest[1], rest[2:]
    here = Path(__file__).resolve().parent
    env = dict(os.environ)
    env["CTX_ADK_CHECKOUT"] = str(checkout)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(here), str(here.parent / "src"), *filter(None, [env.get("PYTHONPATH")])]
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "adk_suite_plugin",
        "-p",
        "no:cacheprovider",
        "-rsxX",
        str(SUITE),
        *rest,
    ]
    with tempfile.TemporaryDirectory() as work:
        server = None
        if ctx is not None:
            server, env["CTX_TEST_URL"], env["CTX_TEST_TOKEN"] = _serve(ctx, Path(work) / "data")
        try:
            return subprocess.call(command, cwd=checkout, env=env)
        finally:
            if server is not None:
                server.terminate()
                server.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
