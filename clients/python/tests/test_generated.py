"""The routes and types generated from the OpenAPI document
(src/ctx_client/_generated.py) are what tools/gen_routes.py makes of the
live server's document today (tests/test_routes.py checks that every
operation in it is a method of both clients)."""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path
from types import ModuleType

from ctx_client import Client, _generated

PACKAGE = Path(__file__).resolve().parents[1]
GENERATED = PACKAGE / "src" / "ctx_client" / "_generated.py"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_routes", PACKAGE / "tools" / "gen_routes.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_module_is_what_the_servers_document_generates(client: Client) -> None:
    expected = generator().render(client.openapi_json(all=True))
    current = GENERATED.read_text()
    diff = "".join(
        difflib.unified_diff(
            current.splitlines(True), expected.splitlines(True), "checked in", "generated"
        )
    )
    assert not diff, (
        "src/ctx_client/_generated.py differs from what the server's OpenAPI document "
        "generates; regenerate it (python tools/gen_routes.py --ctx <ctx binary>):\n" + diff
    )


def test_every_operation_of_the_document_is_generated(client: Client) -> None:
    served = {
        op["operationId"]
        for item in client.openapi_json(all=True)["paths"].values()
        for op in item.values()
        if isinstance(op, dict) and "operationId" in op
    }
    assert served == set(_generated.OPERATIONS)
    assert all(callable(getattr(_generated, op)) for op in served)
