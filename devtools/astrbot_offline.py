"""``astrbot`` with its online checks turned off: the offline demo's AstrBot.

    python devtools/astrbot_offline.py run -p 6195   (as ``astrbot run -p 6195``)

Offline, AstrBot's start fetches model metadata from models.dev (two
warnings and an error in the log) and every dashboard load asks for new
releases (an error and a ~370-line traceback each time). Neither is
something the demo shows or needs, and AstrBot has no setting for them, so
this runs AstrBot's own command line with the two checks answered at once:
no metadata (as when the fetch fails), no newer release. Nothing else is
changed. Run as a script, not as ``-m``: only this folder joins ``sys.path``.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

# The updater moved and was renamed in AstrBot 4.29 (updator → updater).
UPDATERS = (("astrbot.core.updater", "AstrBotUpdater"), ("astrbot.core.updator", "AstrBotUpdator"))


async def _no_metadata() -> None:
    return None


async def _no_newer_release(self: Any, *args: Any, **kwargs: Any) -> None:
    return None


async def _no_releases(self: Any, *args: Any, **kwargs: Any) -> list:
    return []


def quiet_online_checks() -> list[str]:
    """Turn off the model-metadata fetch at start and the update check of
    the dashboard; which were found (a version without one is left as it is)."""
    turned_off = []
    lifecycle = importlib.import_module("astrbot.core.core_lifecycle")
    if hasattr(lifecycle, "update_llm_metadata"):
        setattr(lifecycle, "update_llm_metadata", _no_metadata)  # noqa: B010 (a name mypy cannot see)
        turned_off.append("model metadata")
    for module_name, class_name in UPDATERS:
        try:
            updater = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            continue
        updater.check_update = _no_newer_release
        updater.get_releases = _no_releases
        turned_off.append("updates")
    return turned_off


def main() -> int:
    quiet_online_checks()
    from astrbot.cli.__main__ import cli

    return int(cli() or 0)


if __name__ == "__main__":
    sys.exit(main())
