"""The package as its users install it: the version from its metadata,
ranges in the framework extras, test-only packages in dependency groups."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import httpx

import ctx_client
from ctx_client import Client

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())


def name(requirement: str) -> str:
    m = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert m, requirement
    return m.group(0).lower()


def test_the_version_is_the_installed_packages() -> None:
    version = importlib.metadata.version("ctx-client")
    assert ctx_client.__version__ == version == PYPROJECT["project"]["version"]
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["user-agent"])
        return httpx.Response(200, text="ok")

    with Client("http://ctx.test", transport=httpx.MockTransport(answer)) as c:
        assert c.healthz() == "ok"
    assert seen == [f"ctx-client-python/{version}"]


def test_the_extras_allow_ranges_and_the_test_group_pins_them() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert set(extras) == {"claude", "langgraph", "openai", "adk"}
    groups = PYPROJECT["dependency-groups"]
    pinned = {name(r): r for r in groups["frameworks"]}
    for extra, requirements in extras.items():
        for r in requirements:
            assert "==" not in r and "<" in r and ">=" in r, f"{extra}: {r}"
            low = re.search(r">=([^,]+)", r)
            assert low and pinned[name(r)] == f"{name(r)}=={low.group(1)}", (
                f"{extra}: {r} is not tested at its lowest version"
            )


def test_test_only_packages_are_in_no_extra() -> None:
    in_extras = {
        name(r) for rs in PYPROJECT["project"]["optional-dependencies"].values() for r in rs
    }
    groups = PYPROJECT["dependency-groups"]
    test_only = {name(r) for g in ("conformance", "lint", "native") for r in groups[g]}
    test_only |= {name(r) for r in groups["test"] if isinstance(r, str)}
    assert not (in_extras & test_only)
    assert {"langgraph-checkpoint-sqlite", "langgraph-checkpoint-conformance"} <= test_only
    assert "sqlalchemy" in test_only
