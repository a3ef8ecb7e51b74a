"""What is going wrong right now, for the operator: a full disk, a write
lock another program holds, a failing chat model, a journal that cannot be
written, a clock that jumped (docs/faults.md).

Each part that meets a fault reports it under a kind of its own and clears
it once the part works again; ``/ltm status`` (to admins) and the stats
API show what is reported, beside ``engine.notices()``. In memory only: a
fault is about this process, and a restart tries everything afresh.
"""

from __future__ import annotations

import time

from .i18n import Message


class Faults:
    def __init__(self) -> None:
        self._now: dict[str, tuple[Message, float]] = {}  # kind -> (what, since: monotonic)

    def report(self, kind: str, what: Message) -> None:
        since = self._now[kind][1] if kind in self._now else time.monotonic()
        self._now[kind] = (what, since)

    def clear(self, kind: str) -> None:
        # On hot paths (the journal's append): a dict lookup when nothing is wrong.
        if kind in self._now:
            del self._now[kind]

    def __contains__(self, kind: str) -> bool:
        return kind in self._now

    def kinds(self) -> list[str]:
        return sorted(self._now)

    def notices(self) -> list[Message]:
        return [what for what, _ in sorted(self._now.values(), key=lambda entry: entry[1])]
