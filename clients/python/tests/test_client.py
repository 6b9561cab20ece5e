"""The client against a live ctx serve: every core route, sync and async,
and errors as exceptions of the API's kind."""

from __future__ import annotations

import httpx
import pytest

from ctx_client import (
    AsyncClient,
    Client,
    ConflictError,
    InvalidError,
    NotFoundError,
    UnauthenticatedError,
)
from ctx_client._core import artifact_ref_of

TRANSCRIPT = (
    '{"type":"user","uuid":"u1","message":{"role":"user","content":"hi"}}\n',
    '{"type":"assistant","uuid":"a1","message":{"role":"assistant",'
    '"content":[{"type":"text","text":"hello"}]}}\n',
)


def test_batch_writes_commits_artifacts_and_refs_at_once(client: Client, unique: str) -> None:
    ref, thread = f"sessions/{unique}", f"threads/{unique}"
    principal = f"py-{unique}"
    root = client.checkpoint(
        principal=principal,
        template="py-test",
        format="claude-code-v1",
        delta=TRANSCRIPT[0],
        ref=ref,
        expected=None,
    )
    loose = f"loose {unique}".encode() + b"\x00\xff"
    commits = [
        {
            "principal": principal,
            "template": "py-test",
            "format": "claude-code-v1",
            "parent": root["id"],
            "artifact_ref": artifact_ref_of(TRANSCRIPT[1].encode()),
            "session_id": unique,
        },
        {
            "principal": principal,
            "template": "py-test",
            "format": "raw",
            "delta": b"\x00raw bytes",
            "parent_in_batch": 0,
        },
    ]
    refs = [
        {"name": ref, "expected": root["id"], "target_in_batch": 0},
        {"name": thread, "expected": None, "target_in_batch": 1},
    ]
    done = client.batch(commits, refs, artifacts=[TRANSCRIPT[1], loose])
    first, second = done["commits"]
    assert first["parent"] == root["id"] and second["parent"] == first["id"]
    assert first["session_id"] == unique and second["artifact_size"] == 10
    assert [r["target"] for r in done["refs"]] == [first["id"], second["id"]]
    assert client.get_ref(ref)["target"] == first["id"]
    assert client.get_ref(thread)["target"] == second["id"]
    assert client.download_artifact(artifact_ref_of(loose)) == loose
    _, data = client.materialize_bytes(first["id"], stop="root")
    assert data.decode() == "".join(TRANSCRIPT)
    # Sent again with the same times: the same answer, nothing written twice.
    at = first["created_at"]
    again = client.batch(
        [{**commits[0], "created_at": at}, {**commits[1], "created_at": second["created_at"]}],
        refs,
        artifacts=[TRANSCRIPT[1], loose],
    )
    assert again == done
    assert len(client.history(second["id"], depth=10)["commits"]) == 3
    # A stale ref: 409 naming it, with where it points, and nothing written.
    with pytest.raises(ConflictError) as e:
        client.batch(
            [{**commits[0], "created_at": "2026-01-01T00:00:00Z"}],
            [{"name": thread, "expected": root["id"], "target_in_batch": 0}],
        )
    assert e.value.field == "refs[0].expected" and e.value.current == second["id"]
    assert client.resolve(principal) == second["id"]
    # An artifact that is not stored (nor in the batch): 404 naming it.
    with pytest.raises(NotFoundError) as missing:
        client.batch(
            [{**commits[0], "artifact_ref": artifact_ref_of(b"other")}],
        )
    assert missing.value.field == "commits[0].artifact_ref"


async def test_async_batch(aclient: AsyncClient, unique: str) -> None:
    done = await aclient.batch(
        [
            {
                "principal": f"py-{unique}",
                "template": "t",
                "format": "raw",
                "delta": "a",
            },
            {
                "principal": f"py-{unique}",
                "template": "t",
                "format": "raw",
                "delta": "b",
                "parent_in_batch": 0,
            },
        ],
        [{"name": f"sessions/{unique}", "target_in_batch": 1}],
    )
    assert done["commits"][1]["parent"] == done["commits"][0]["id"]
    assert (await aclient.get_ref(f"sessions/{unique}"))["target"] == done["commits"][1]["id"]


def test_health_and_openapi(client: Client) -> None:
    assert client.healthz() == "ok"
    doc = client.openapi_json()
    assert doc["openapi"].startswith("3.1")
    assert "/v1/commits" in doc["paths"]


def test_artifacts_round_trip(client: Client, unique: str) -> None:
    data = f"bytes of {unique}\x00\xff".encode("latin-1")
    info = client.upload_artifact(data)
    assert info["ref"].startswith("art-") and info["size"] == len(data)
    assert client.upload_artifact(data) == info
    assert client.download_artifact(info["ref"]) == data


def test_a_seed_wrapper_starts_fresh_checkpoints_and_reads_again(
    client: Client, unique: str
) -> None:
    """Seed 000's agent wrapper, as written to the seed: it always calls
    ``materialize(ctx)``, with ``ctx`` null on a fresh start, and reads its
    session's ref before the first checkpoint; both answer the empty
    context, not an error. A wrong commit id is still a 404."""
    ctx = None
    meta, data = client.materialize_bytes(ctx, format="anthropic-messages-v1")
    assert (data, meta["message_count"], meta["size"]) == (b"[]", 0, 2)
    assert client.materialize(ctx)["message_count"] == 0
    ref = f"sessions/{unique}"
    read, data = client.read_bytes(ref, format="claude-code-v1")
    assert (read["commit"], data, read["message_count"]) == (None, b"", 0)
    with pytest.raises(NotFoundError):  # the read wrote nothing
        client.get_ref(ref)
    first = client.checkpoint(
        principal=f"py-{unique}",
        template="py-test",
        format="claude-code-v1",
        delta=TRANSCRIPT[0],
        ref=ref,
        expected=read["commit"],
    )
    read, data = client.read_bytes(ref)
    assert read["commit"] == first["id"] and data.decode() == TRANSCRIPT[0]
    meta, data = client.materialize_bytes(first["id"])
    assert data.decode() == TRANSCRIPT[0] and meta["message_count"] == 1
    with pytest.raises(NotFoundError) as e:
        client.read(commit="ctx-" + "0" * 32)
    assert e.value.field == "commit"


async def test_an_async_seed_wrapper_starts_fresh(aclient: AsyncClient, unique: str) -> None:
    """The same first call on the async client: the empty context of a
    fresh start and of a ref with no commit yet."""
    meta, data = await aclient.materialize_bytes(None, format="openai-chat-v1")
    assert (data, meta["message_count"]) == (b"[]", 0)
    read = await aclient.read(f"sessions/{unique}")
    assert read["commit"] is None and read["content"] == ""


def test_checkpoint_chain_materialize_history_refs(client: Client, unique: str) -> None:
    ref = f"sessions/{unique}"
    principal = f"py-{unique}"
    first = client.checkpoint(
        principal=principal,
        template="py-test",
        format="claude-code-v1",
        delta=TRANSCRIPT[0],
        ref=ref,
        expected=None,
        session_id=unique,
    )
    assert first["parent"] is None and first["session_id"] == unique
    second = client.checkpoint(
        principal=principal,
        template="py-test",
        format="claude-code-v1",
        delta=TRANSCRIPT[1].encode(),  # bytes go as delta_base64
        parent=first["id"],
        ref=ref,
        expected=first["id"],
        tags={"k": "v"},
    )
    assert second["parent"] == first["id"] and second["tags"]["k"] == "v"

    assert client.get_commit(second["id"]) == second
    assert client.get_ref(ref)["target"] == second["id"]
    assert [r["target"] for r in client.list_refs(prefix=ref)] == [second["id"]]
    hist = client.history(second["id"], depth=10)
    assert [c["id"] for c in hist["commits"]] == [second["id"], first["id"]]

    meta, data = client.materialize_bytes(second["id"], stop="root")
    assert data.decode() == "".join(TRANSCRIPT)
    assert meta["message_count"] == 2

    assert client.resolve(principal) == second["id"]

    # A stale compare-and-swap: 409 with where the ref points now.
    with pytest.raises(ConflictError) as e:
        client.set_ref(ref, first["id"], expected=first["id"])
    assert e.value.status == 409 and e.value.current == second["id"]
    assert client.set_ref(ref, first["id"], expected=second["id"])["target"] == first["id"]

    changed = client.update_metadata(first["id"], summary="greeting")
    assert changed["summary"] == "greeting"
    assert client.update_metadata(first["id"], summary=None).get("summary") is None


def test_same_checkpoint_twice_is_one_commit(client: Client, unique: str) -> None:
    kw = dict(
        principal=f"py-{unique}",
        template="t",
        format="raw",
        delta="x",
        created_at="2026-01-01T00:00:00Z",
    )
    assert client.checkpoint(**kw)["id"] == client.checkpoint(**kw)["id"]


def test_errors_carry_kind_field_and_status(client: Client, server_url: str) -> None:
    with pytest.raises(NotFoundError) as nf:
        client.get_commit("ctx-" + "0" * 32)
    assert nf.value.kind == "not_found" and nf.value.status == 404
    with pytest.raises(InvalidError) as bad:
        client.get_commit("not-a-commit")
    assert bad.value.field == "ctx" and bad.value.status == 400
    with pytest.raises(InvalidError) as bad:
        client.checkpoint(principal="has space", template="t", format="raw", delta="x")
    assert bad.value.field == "principal"
    with pytest.raises(NotFoundError):
        client.get_ref("sessions/never-made-anywhere")
    with Client(server_url, token="tok-wrong") as stranger:
        with pytest.raises(UnauthenticatedError) as un:
            stranger.get_ref("sessions/x")
    assert un.value.status == 401


async def test_async_client(aclient: AsyncClient, unique: str) -> None:
    ref = f"sessions/{unique}"
    c = await aclient.checkpoint(
        principal=f"py-{unique}",
        template="t",
        format="claude-code-v1",
        delta=TRANSCRIPT[0],
        ref=ref,
        expected=None,
    )
    assert (await aclient.get_ref(ref))["target"] == c["id"]
    meta, data = await aclient.materialize_bytes(c["id"], stop="root")
    assert data.decode() == TRANSCRIPT[0] and meta["message_count"] == 1
    with pytest.raises(ConflictError) as e:
        await aclient.checkpoint(
            principal=f"py-{unique}",
            template="t",
            format="claude-code-v1",
            delta=TRANSCRIPT[1],
            parent=c["id"],
            ref=ref,
            expected=None,
        )
    assert e.value.current == c["id"]


def test_from_env_finds_the_server_as_the_cli_does(
    server_url: str, token: str, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("CTX_SERVER", "CTX_TOKEN", "CTX_DATA"):
        monkeypatch.delenv(name, raising=False)
    with Client.from_env() as c:
        assert c.base_url == "http://127.0.0.1:7878" and c.token is None
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "token").write_text(token + "\n")
    monkeypatch.setenv("CTX_SERVER", server_url)
    monkeypatch.setenv("CTX_DATA", "d")
    with Client.from_env() as c:
        assert c.token == token and c.healthz() == "ok"
        assert c.list_refs(prefix="none-such/") == []
    monkeypatch.setenv("CTX_TOKEN", "tok-from-env")
    assert AsyncClient.from_env().token == "tok-from-env"


@pytest.mark.parametrize("base", ["http://ctx.test", "http://ctx.test/", "http://ctx.test/api/"])
def test_requests_go_to_the_base_url_with_their_path_and_query(base: str) -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json={})

    prefix = base.rstrip("/")
    with Client(base, transport=httpx.MockTransport(answer)) as c:
        for _ in range(2):  # the second from the URLs the client keeps
            c.get_ref("a/b c")
            c.missing_summaries(limit=5)
    assert seen[0] == seen[2] == f"{prefix}/v1/refs/a/b%20c"
    assert seen[1] == seen[3] and seen[1].startswith(f"{prefix}/v1/commits?"), seen[1]
    assert "limit=5" in seen[1] and "missing_summary=true" in seen[1]
