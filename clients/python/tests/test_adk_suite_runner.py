"""tools/run_adk_suite.py and its plugin, on a stand-in checkout: the real
suite lives in adk-python's repository, not in the google-adk package, so
this checks the hook itself. The stand-in has the registry's shape (a
``_Backend`` record, ``BACKENDS``, a ``session_service`` fixture over it)
and one contract test; the plugin must register ``ctx`` in it and run the
test against a live ``CtxSessionService`` only."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

RUNNER = Path(__file__).resolve().parents[1] / "tools" / "run_adk_suite.py"

REGISTRY = """
import dataclasses
import pytest


@dataclasses.dataclass(frozen=True)
class _Backend:
    name: str
    make: object
    divergences: dict = dataclasses.field(default_factory=dict)


BACKENDS = [_Backend("never", None)]


@pytest.fixture(params=BACKENDS, ids=lambda b: b.name)
async def session_service(request, tmp_path):
    async with request.param.make(tmp_path) as service:
        yield service
"""

SUITE = """
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions

from . import _conformance
from ._conformance import session_service  # noqa: F401


async def test_round_trip(session_service):
    s = await session_service.create_session(app_name="a", user_id="u", session_id="s")
    await session_service.append_event(
        s, Event(author="u", actions=EventActions(state_delta={"k": 1}))
    )
    got = await session_service.get_session(app_name="a", user_id="u", session_id="s")
    assert got.state == {"k": 1} and len(got.events) == 1
    assert type(session_service).__name__ == "CtxSessionService"


def test_the_registry_holds_ctx():
    assert [b.name for b in _conformance.BACKENDS] == ["never", "ctx"]
"""


def _checkout(root: Path) -> Path:
    sessions = root / "tests" / "unittests" / "sessions"
    sessions.mkdir(parents=True)
    for d in (root / "tests", root / "tests" / "unittests", sessions):
        (d / "__init__.py").write_text("")
    (sessions / "_conformance.py").write_text(REGISTRY)
    (sessions / "test_session_service.py").write_text(SUITE)
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nasyncio_mode = "auto"\n'
        'asyncio_default_fixture_loop_scope = "function"\n'
    )
    return root


def test_the_runner_registers_ctx(tmp_path: Path, server_url: str, token: str) -> None:
    env = {**os.environ, "CTX_TEST_URL": server_url, "CTX_TEST_TOKEN": token}
    run = subprocess.run(
        [sys.executable, str(RUNNER), str(_checkout(tmp_path / "adk")), "-v"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "test_round_trip[ctx] PASSED" in run.stdout
    assert "[never]" not in run.stdout
    assert "ctx backend: 1 of 1 contract tests passed against CtxSessionService" in run.stdout
    assert re.search(r"\b2 passed\b", run.stdout), run.stdout


def test_the_runner_refuses_what_is_no_checkout(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(RUNNER), str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2
    assert "not an adk-python checkout" in run.stderr
