"""moto's server with its Step Functions interpreter on, whose Lambda
invocations are forwarded to `cargo lambda watch` (the real Rust function
binaries under the Lambda runtime API), so a Wait -> lambda:invoke state
machine runs end to end offline.

Usage: bridge.py PORT WATCH_URL   (prints "ready" when serving)
"""
import json
import os
import sys
import time
import urllib.request

port, watch = int(sys.argv[1]), sys.argv[2].rstrip("/")
# The interpreter calls back to its own server on this port.
os.environ["MOTO_PORT"] = str(port)

from moto.awslambda import models  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402


def invoke(self, function_name, qualifier, body, headers, response_headers):
    name = function_name.rsplit(":", 1)[-1] if function_name.startswith("arn:") else function_name
    data = body if isinstance(body, bytes) else (body or "").encode()
    req = urllib.request.Request(f"{watch}/2015-03-31/functions/{name}/invocations",
                                 data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        response_headers["x-amz-function-error"] = "Unhandled"
        return e.read()


models.LambdaBackend.invoke = invoke

server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
server.start()
req = urllib.request.Request(f"http://127.0.0.1:{port}/moto-api/config", method="POST",
                             data=json.dumps({"stepfunctions": {"execute_state_machine": True}}).encode(),
                             headers={"Content-Type": "application/json"})
urllib.request.urlopen(req, timeout=5)
print("ready", flush=True)
while True:
    time.sleep(3600)
