"""A pytest plugin that registers ``CtxSessionService`` in Google ADK's own
session-service contract suite (adk-python's
``tests/unittests/sessions/_conformance.py``), run by
:mod:`run_adk_suite` (see there).

The suite offers one hook for a new backend: its ``BACKENDS`` registry,
whose ``session_service`` fixture every contract test of
``test_session_service.py`` takes. This plugin is imported before pytest
collects the suite, imports the registry module itself, appends a ``ctx``
backend (a ``CtxSessionService`` on the live server named by
``CTX_TEST_URL``/``CTX_TEST_TOKEN``, in a ref namespace of its own per
test) and rebuilds that fixture, with ADK's own fixture function, over the
``ctx`` backend only. Nothing of ADK's is copied or edited; every other test
of the module runs as it ships.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ctx_client import AsyncClient
from ctx_client.adk import CtxSessionService


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise pytest.UsageError(f"{name} is not set: run this through tools/run_adk_suite.py")
    return value


def _package_of(directory: Path) -> tuple[Path, str]:
    """The directory pytest puts on ``sys.path`` for a test in ``directory``
    (its first parent without ``__init__.py``) and the dotted package name
    it imports it under, as pytest's ``prepend`` import mode does."""
    parts: list[str] = []
    while (directory / "__init__.py").exists():
        parts.append(directory.name)
        directory = directory.parent
    return directory, ".".join(reversed(parts))


@contextlib.asynccontextmanager
async def _make_ctx(tmp_path: Path) -> AsyncIterator[CtxSessionService]:
    del tmp_path
    client = AsyncClient(_env("CTX_TEST_URL"), token=_env("CTX_TEST_TOKEN"))
    try:
        # The contract tests reuse app, user and session names: each test
        # gets refs of its own.
        yield CtxSessionService(client, namespace=f"adk-suite/{uuid.uuid4().hex[:12]}")
    finally:
        await client.aclose()


def _register() -> Any:
    sessions = Path(_env("CTX_ADK_CHECKOUT")).resolve() / "tests" / "unittests" / "sessions"
    registry = sessions / "_conformance.py"
    if not registry.exists():
        raise pytest.UsageError(f"{registry} does not exist: not an adk-python checkout with it")
    root, package = _package_of(sessions)
    sys.path.insert(0, str(root))
    conformance: Any = importlib.import_module(f"{package}._conformance")
    backend = conformance._Backend("ctx", _make_ctx)
    conformance.BACKENDS.append(backend)
    fixture = conformance.session_service._get_wrapped_function()
    conformance.session_service = pytest.fixture(params=[backend], ids=lambda b: b.name)(fixture)
    return conformance


_REGISTRY = _register()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    ran = [
        r
        for key in ("passed", "failed", "xfailed", "xpassed", "error")
        for r in terminalreporter.stats.get(key, [])
        if getattr(r, "when", "call") == "call" and "[ctx" in r.nodeid
    ]
    passed = [r for r in terminalreporter.stats.get("passed", []) if "[ctx" in r.nodeid]
    terminalreporter.write_line(
        f"ctx backend: {len(passed)} of {len(ran)} contract tests passed against CtxSessionService"
    )
    skipped = terminalreporter.stats.get("skipped", [])
    if skipped:
        terminalreporter.write_line(f"FAILED: {len(skipped)} test(s) skipped", red=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and reporter.stats.get("skipped") and exitstatus == 0:
        session.exitstatus = 1
