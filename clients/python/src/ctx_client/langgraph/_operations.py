"""Every operation of a saver, in one class."""

from __future__ import annotations

from ._delta import _DeltaHistory
from ._threads import _Threads
from ._writes import _Writes


class _Core(_Writes, _DeltaHistory, _Threads):
    """What both savers share: the operations as call generators."""
