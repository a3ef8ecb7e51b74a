"""What is going wrong right now, for the operator (docs/faults.md): each part
reports a fault under its own kind and clears it once it works again. In memory
only: a fault is about this process, and a restart tries everything afresh.
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
