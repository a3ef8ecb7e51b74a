"""Export documents as the tests change them: resealed after an edit made
on purpose, and numbers as a browser leaves them (the unit and the
end-to-end tests share these)."""

from __future__ import annotations

from typing import Any

from astrbot_plugin_ltm.operating.export_format import checksum


def reseal(doc: dict[str, Any]) -> dict[str, Any]:
    """Recompute every checksum of an export, as someone editing the file
    on purpose would: the validators, not the checksums, must refuse it."""
    for item in doc["items"]:
        item["checksum"] = checksum({k: v for k, v in item.items() if k != "checksum"})
    doc["checksum"] = checksum([i["checksum"] for i in doc["items"]])
    return doc


def like_a_browser(value: Any) -> Any:
    """What JSON.parse → JSON.stringify does to values: 1.0 becomes 1."""
    if isinstance(value, dict):
        return {k: like_a_browser(x) for k, x in value.items()}
    if isinstance(value, list):
        return [like_a_browser(x) for x in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value
