"""The README's "Use it from your agent" lines, run as written: only the
server's address and the token file are substituted."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def block(marker: str) -> str:
    text = README.read_text()
    m = re.search(rf"<!-- {marker} -->\n```python\n(.*?)```\n<!-- /{marker} -->", text, re.S)
    assert m, f"README has no {marker} block"
    return m.group(1)


async def test_the_claude_sdk_lines(
    server_url: str, token: str, tmp_path: Path, monkeypatch, unique: str
) -> None:
    code = block("claude-sdk")
    assert len(code.strip().splitlines()) == 5
    (tmp_path / ".ctx").mkdir()
    (tmp_path / ".ctx" / "token").write_text(token + "\n")
    monkeypatch.chdir(tmp_path)
    assert '"http://127.0.0.1:7878"' in code
    scope: dict = {}
    exec(code.replace('"http://127.0.0.1:7878"', repr(server_url)), scope)  # noqa: S102
    store, options = scope["store"], scope["options"]
    assert options.session_store is store
    key = {"project_key": f"readme-{unique}", "session_id": "s"}
    await store.append(key, [{"type": "x", "uuid": "1"}])
    assert await store.load(key) == [{"type": "x", "uuid": "1"}]
    await store.client.aclose()
