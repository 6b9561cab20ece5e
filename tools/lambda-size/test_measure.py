"""Checks of tools/lambda-size/measure.py without cargo: its Runtime API
server driven by small fake runtimes (Python scripts speaking the Lambda
Runtime API), its packaging and its reading of template.yaml. Run by
tests/run: `python -m unittest discover -s tools/lambda-size`."""

import json
import stat
import sys
import tempfile
import unittest
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import measure
from measure import Function, cold_start, package, read_template, unpack

# A runtime: asks for an event, then does what ACTION says with it.
FAKE = """#!{python}
import json, os, subprocess, sys, time, urllib.request
api = "http://" + os.environ["AWS_LAMBDA_RUNTIME_API"] + "/2018-06-01/runtime"
time.sleep({start_delay})
def post(path, body):
    req = urllib.request.Request(api + path, data=json.dumps(body).encode(), method="POST")
    urllib.request.urlopen(req).read()
if {action!r} == "init-error":
    post("/init/error", {{"errorType": "Config", "errorMessage": "no table"}})
    raise SystemExit(1)
with urllib.request.urlopen(api + "/invocation/next") as r:
    event = json.loads(r.read())
    rid = r.headers["Lambda-Runtime-Aws-Request-Id"]
    deadline = int(r.headers["Lambda-Runtime-Deadline-Ms"])
seen = {{
    "route": event.get("routeKey"),
    "memory": os.environ["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"],
    "handler": os.environ["_HANDLER"],
    "table": os.environ.get("CTX_TABLE"),
    "deadline": deadline,
}}
if {action!r} == "late":
    # Its next request arrives after the run has ended, sent by a process
    # the run's end does not kill (as a killed runtime's request can be
    # handled late). Started before the answer, which ends the run.
    subprocess.Popen(
        [sys.executable, "-c",
         "import time, urllib.request; time.sleep(0.3); "
         "urllib.request.urlopen(" + repr(api + "/invocation/next") + ", timeout=5)"],
        start_new_session=True,
    )
if {action!r} == "error":
    post("/invocation/" + rid + "/error", {{"errorType": "Invalid", "errorMessage": json.dumps(seen)}})
else:
    post("/invocation/" + rid + "/response", {{"statusCode": {status}, "body": json.dumps(seen)}})
if {action!r} == "late":
    raise SystemExit(0)
urllib.request.urlopen(api + "/invocation/next")  # held until the run ends
"""


def http_function(**kw) -> Function:
    return Function(
        logical="ResolveFunction",
        binary="resolve",
        memory=256,
        timeout=30,
        env={"CTX_TABLE": "ctx-metatable"},
        routes=[("GET", "/v1/resolve")],
        **kw,
    )


class FakeRuntime(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def bootstrap(self, action="response", status=401, start_delay=0.0, name="bootstrap") -> Path:
        path = Path(self.tmp.name) / name
        path.write_text(
            FAKE.format(
                python=sys.executable, action=action, status=status, start_delay=start_delay
            )
        )
        path.chmod(0o755)
        return path

    def test_times_init_and_the_first_answer_and_hands_over_the_event(self):
        run = cold_start(http_function(), self.bootstrap(), timeout=30)
        self.assertGreater(run.init_ms, 0)
        self.assertGreater(run.invoke_ms, 0)
        self.assertGreaterEqual(run.total_ms, run.init_ms + run.invoke_ms)
        self.assertIsNotNone(run.rss_mib)

    def test_the_function_sees_the_event_of_its_route_and_lambdas_environment(self):
        seen = {}
        original = measure.check_answer

        def capture(f, inv):
            seen.update(json.loads(json.loads(inv.body)["body"]))
            return original(f, inv)

        measure.check_answer = capture
        try:
            cold_start(http_function(), self.bootstrap(), timeout=30)
        finally:
            measure.check_answer = original
        self.assertEqual(seen["route"], "GET /v1/resolve")
        self.assertEqual(seen["memory"], "256")
        self.assertEqual(seen["handler"], "bootstrap")
        self.assertTrue(seen["table"])

    def test_an_unexpected_status_fails(self):
        with self.assertRaisesRegex(RuntimeError, "status 200, expected 401"):
            cold_start(http_function(), self.bootstrap(status=200), timeout=30)

    def test_an_init_error_fails_and_says_so(self):
        with self.assertRaisesRegex(RuntimeError, "init error: .*no table"):
            cold_start(http_function(), self.bootstrap("init-error"), timeout=30)

    def test_a_directly_invoked_function_must_refuse_the_event_it_is_given(self):
        expire = Function("BranchExpireFunction", "branch-expire", 256, 30, {})
        run = cold_start(expire, self.bootstrap("error"), timeout=30)
        self.assertGreater(run.init_ms, 0)
        with self.assertRaisesRegex(RuntimeError, "answered instead of refusing"):
            cold_start(expire, self.bootstrap(), timeout=30)

    def test_a_late_request_of_an_ended_run_does_not_take_the_next_runs_event(self):
        # The previous runtime's last request for an event can reach the
        # Runtime API after its run ended (CI saw it: the next run then
        # waited for an event it had been robbed of). Each run has its own.
        cold_start(http_function(), self.bootstrap("late", name="late"), timeout=30)
        slow = self.bootstrap(start_delay=0.8, name="slow")
        run = cold_start(http_function(), slow, timeout=5)
        self.assertGreater(run.init_ms, 700)

    def test_a_runtime_that_never_asks_times_out(self):
        path = Path(self.tmp.name) / "bootstrap"
        path.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")
        path.chmod(0o755)
        with self.assertRaisesRegex(RuntimeError, "no answer .*still running"):
            cold_start(http_function(), path, timeout=0.5)


class Packaging(unittest.TestCase):
    def test_one_executable_bootstrap_in_the_zip(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            binary = tmp / "resolve"
            binary.write_bytes(b"\x7fELF" + bytes(range(256)) * 400)
            zpath = package(binary, tmp, strip=False, level=6)
            with zipfile.ZipFile(zpath) as z:
                (info,) = z.infolist()
                self.assertEqual(info.filename, "bootstrap")
                self.assertEqual((info.external_attr >> 16) & 0o777, 0o755)
                self.assertEqual(info.compress_type, zipfile.ZIP_DEFLATED)
            self.assertLess(zpath.stat().st_size, binary.stat().st_size)
            self.assertEqual(measure.unzipped_size(zpath), binary.stat().st_size)
            out = unpack(zpath, tmp / "task")
            self.assertEqual(out.read_bytes(), binary.read_bytes())
            self.assertTrue(out.stat().st_mode & stat.S_IXUSR)


class Template(unittest.TestCase):
    def test_every_function_with_its_environment_resolved(self):
        functions = {f.binary: f for f in read_template()}
        self.assertEqual(
            set(functions),
            {"checkpoint", "materialize", "resolve", "history", "branch", "branch-expire", "summarizer"},
        )
        for f in functions.values():
            for k, v in f.env.items():
                self.assertNotIn("${", v, f"{f.binary} {k}")
            self.assertIn("CTX_TABLE", f.env)
            self.assertEqual(bool(f.routes), f.binary not in ("branch-expire", "summarizer"))
        self.assertEqual(functions["checkpoint"].env["CTX_SUMMARIZER"], "extractive")
        self.assertTrue(
            functions["branch"].env["CTX_BRANCH_TIMER_ARN"].startswith("arn:aws:states:")
        )
        self.assertGreater(functions["materialize"].memory, functions["resolve"].memory)

    def test_each_http_function_gets_an_event_for_one_of_its_routes(self):
        for f in read_template():
            event, expected = measure.event_for(f)
            json.loads(event)
            if f.routes:
                route = json.loads(event)["routeKey"]
                self.assertIn(tuple(route.split(" ", 1)), f.routes)
                self.assertTrue(expected.startswith("401"))


if __name__ == "__main__":
    unittest.main()
