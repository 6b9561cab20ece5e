"""LangGraph's own checkpointer suite (`langgraph-checkpoint-conformance`,
run as it ships) against CtxSaver and AsyncCtxSaver on the live server:
every capability must be detected and every test must pass."""

from __future__ import annotations

import uuid

import pytest
from conftest import TRANSPORT, open_aclient, open_client
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from ctx_client.langgraph import AsyncCtxSaver, CtxSaver

# What langgraph-checkpoint-conformance 0.0.2 runs over all 8 capabilities.
EXPECTED_TESTS = 81


def _check(report) -> None:
    from importlib.metadata import version

    from conftest import SUMMARY_LINES

    report.print_report()
    passed = sum(r.tests_passed for r in report.results.values())
    failed = sum(r.tests_failed for r in report.results.values())
    skipped = [c for c, r in report.results.items() if not r.detected]
    failures = [f for r in report.results.values() for f in r.failures]
    SUMMARY_LINES.append(
        f"langgraph-checkpoint-conformance {version('langgraph-checkpoint-conformance')} on "
        f"{report.checkpointer_name}: {passed}/{EXPECTED_TESTS} tests passed, {failed} failed, "
        f"{len(skipped)} of {len(ALL_CAPABILITIES)} capabilities skipped"
    )
    assert skipped == [], f"capabilities not detected: {skipped}"
    assert set(report.results) == {c.value for c in ALL_CAPABILITIES}
    assert failures == [], "\n".join(failures)
    assert (passed, failed) == (EXPECTED_TESTS, 0)


@pytest.mark.asyncio
async def test_ctx_saver_passes_the_conformance_suite(server_url: str, token: str) -> None:
    # Each capability gets a fresh saver over its own prefix, so one
    # suite's threads never meet another's.
    @checkpointer_test(name=f"CtxSaver ({TRANSPORT})")
    async def factory():
        with open_client(server_url, token) as client:
            yield CtxSaver(client, prefix=f"lgconf-{uuid.uuid4().hex[:8]}")

    _check(await validate(factory, progress=ProgressCallbacks.default()))


@pytest.mark.asyncio
async def test_async_ctx_saver_passes_the_conformance_suite(server_url: str, token: str) -> None:
    @checkpointer_test(name=f"AsyncCtxSaver ({TRANSPORT})")
    async def factory():
        async with open_aclient(server_url, token) as client:
            yield AsyncCtxSaver(client, prefix=f"lgconf-{uuid.uuid4().hex[:8]}")

    _check(await validate(factory, progress=ProgressCallbacks.default()))
