"""Starting a `ctx serve` for the benches in this directory."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def start_ctx(ctx: str, data: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    """A `ctx serve --store local` of the binary `ctx` on data directory
    `data` and a free port: (process, base URL, token). Exits the bench if
    it does not start within 30 s."""
    out = data.parent / "serve.out"
    with open(out, "w") as log:
        proc = subprocess.Popen(
            [ctx, "serve", "--store", "local", "--data", str(data), "--addr", "127.0.0.1:0"],
            stdout=log,
            stderr=subprocess.DEVNULL,
        )
    for _ in range(300):
        for line in out.read_text().splitlines():
            if line.startswith("ctx listening on "):
                return proc, line.split()[-1], (data / "token").read_text().strip()
        if proc.poll() is not None:
            sys.exit("ctx serve exited")
        time.sleep(0.1)
    proc.kill()
    sys.exit("ctx serve did not start")
