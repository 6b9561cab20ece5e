"""A stand-in OpenTelemetry collector for tests: accepts OTLP/HTTP posts
(`/v1/traces`, `/v1/metrics`) on 127.0.0.1 and keeps each body as a file
in DIR (`traces-N.pb`, `metrics-N.pb`), answering 200 only after the file
is written, so whoever waited for the answer finds the file.

Usage: python3 tools/otlp-sink/sink.py DIR  (prints the port, then serves
until killed)
"""

from __future__ import annotations

import itertools
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

OUT = Path(sys.argv[1])
SEQ = itertools.count()


class Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        kind = {"/v1/traces": "traces", "/v1/metrics": "metrics"}.get(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if kind is None:
            self.send_response(404)
        else:
            (OUT / f"{kind}-{next(SEQ)}.pb").write_bytes(body)
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
