"""Reading, moving and listing a saver's refs."""

from __future__ import annotations

from typing import Any, cast

from .. import _routes as routes
from ..errors import ConflictError, NotFoundError
from ._op import Op
from ._state import _State

REF_PAGE = 1000


class _Refs(_State):
    """Refs read, moved by compare-and-swap and listed."""

    def get_ref(self, name: str) -> Op[str | None]:
        """The ref's target, or ``None`` when it does not exist."""
        try:
            rec = yield routes.get_ref(name)
        except NotFoundError:
            self.saw(name, None)
            return None
        target = cast(str, rec["target"])
        self.saw(name, target)
        return target

    def known_ref(self, name: str) -> Op[str | None]:
        """Where the ref pointed when this saver last saw it (read if never)."""
        if name in self.tips:
            return self.tips[name]
        return (yield from self.get_ref(name))

    def set_ref(self, name: str, target: str, expected: str | None = None) -> Op[None]:
        """Points ``name`` at ``target`` whatever it pointed at."""
        if expected is None:
            expected = self.tips.get(name)
        for _ in range(20):
            try:
                yield routes.set_ref(name, target, expected)
                self.saw(name, target)
                return
            except ConflictError as e:
                self.saw(name, e.current)
                if e.current == target:
                    return
                expected = e.current
        raise RuntimeError(f"ref {name} kept moving while being set")

    def delete_ref(self, name: str, expected: str) -> Op[None]:
        self.tips.pop(name, None)
        try:
            yield routes.delete_ref(name, expected)
        except (NotFoundError, ConflictError):
            pass

    def list_refs(self, prefix: str) -> Op[list[dict[str, Any]]]:
        """Every ref under ``prefix``, a page at a time (each full page's
        last name is where the next starts)."""
        out: list[dict[str, Any]] = []
        after: str | None = None
        while True:
            page = yield routes.list_refs(prefix, REF_PAGE, after)
            out.extend(cast(list[dict[str, Any]], page))
            if len(page) < REF_PAGE:
                return out
            after = page[-1]["name"]
