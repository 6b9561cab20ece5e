"""Fixtures: a live ctx server (started by tests/python/run, which exports
CTX_TEST_URL, CTX_TEST_TOKEN and CTX_TEST_DATA) and clients of it.

With ``CTX_TEST_TRANSPORT=embedded`` the clients are ctx in this process
(:class:`~ctx_client.Embedded` and :class:`~ctx_client.AsyncEmbedded`)
over the server's own data directory, the same tenant: every suite that
takes its client from here (the adapters' and the frameworks' own) runs on
both. Tests of HTTP itself (request counts, retries, transports) build an
HTTP client of their own.

Without the server the tests fail rather than skip, and a run in which any
test was skipped fails too: every suite here must really run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from ctx_client import AsyncClient, AsyncEmbedded, Client, Embedded

TRANSPORT = os.environ.get("CTX_TEST_TRANSPORT", "http")
"""``http`` (the live server) or ``embedded`` (ctx in this process)."""


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run the tests with tests/python/run", pytrace=False)
    return value


@pytest.fixture(scope="session")
def server_url() -> str:
    """The base URL of the live ctx serve."""
    return _env("CTX_TEST_URL")


@pytest.fixture(scope="session")
def token() -> str:
    """Its bearer token."""
    return _env("CTX_TEST_TOKEN")


def open_client(server_url: str, token: str) -> Client:
    """A blocking client of the live server's data, by ``TRANSPORT``."""
    if TRANSPORT == "embedded":
        return Embedded(_env("CTX_TEST_DATA"))
    return Client(server_url, token=token)


def open_aclient(server_url: str, token: str) -> AsyncClient:
    """An async client of the live server's data, by ``TRANSPORT``."""
    if TRANSPORT == "embedded":
        return AsyncEmbedded(_env("CTX_TEST_DATA"))
    return AsyncClient(server_url, token=token)


@pytest.fixture
def client(server_url: str, token: str) -> Iterator[Client]:
    """A blocking client of the live server's data."""
    with open_client(server_url, token) as c:
        yield c


@pytest.fixture
async def aclient(server_url: str, token: str) -> AsyncIterator[AsyncClient]:
    """An async client of the live server's data."""
    async with open_aclient(server_url, token) as c:
        yield c


@pytest.fixture
def unique() -> str:
    """A name no other test uses (refs, principals, sessions)."""
    return uuid.uuid4().hex[:12]


SUMMARY_LINES: list[str] = []
"""Lines tests want printed at the end of the run (suites' own tallies)."""


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in SUMMARY_LINES:
        terminalreporter.write_line(line)
    skipped = terminalreporter.stats.get("skipped", [])
    if skipped:
        terminalreporter.write_line(
            f"FAILED: {len(skipped)} test(s) skipped; every suite must run", red=True
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped and exitstatus == 0:
        session.exitstatus = 1


@pytest.fixture(scope="session")
def ctx_bin() -> str:
    """The ctx binary the server runs (for commands tests run themselves)."""
    return _env("CTX_TEST_BIN")
