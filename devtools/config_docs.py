"""Write docs/configuration.md from _conf_schema.json, its English texts
(.astrbot-plugin/i18n/en-US.json) and the ranges config.py enforces.

    python -m devtools.config_docs            # rewrite docs/configuration.md
    python -m devtools.config_docs --check    # exit 1 if it is out of date

tests/test_docs.py fails when the file differs from what this writes, so
the page always says what AstrBot's config form shows.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from astrbot_plugin_ltm.config import _CHOICES, _RANGES

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "_conf_schema.json"
ENGLISH = REPO / ".astrbot-plugin" / "i18n" / "en-US.json"
TARGET = REPO / "docs" / "configuration.md"

INTRO = """# Configuration

<!-- Written by `python -m devtools.config_docs` from _conf_schema.json; edit those, not this. -->

Every setting is in AstrBot's WebUI → Plugins → astrbot_plugin_ltm →
Configure, in Chinese and English. Settings are checked when the plugin
loads and whenever they change: a value of the wrong type or outside its
range is replaced by its default, and the AstrBot log says which and why,
in English and Chinese (nothing crashes). Through the dashboard API (`PUT policy`) an invalid value
is refused with a 400 and nothing changes. Saving AstrBot's form reloads the
plugin with the new settings; the review page's policy form (`enable`,
`emergency_read_only`, `write_policy`, `read_policy`) applies them at once.
`tests/e2e/test_e2e_config_form.py` opens AstrBot's form in a real browser:
every text below shows in the dashboard's language, and a value saved
there reaches the plugin.

Each entry: the setting's path, its type and default, what config.py
accepts, then the English and the Chinese text of the form.
"""


def _value(value: Any) -> str:
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _accepts(path: str, entry: dict[str, Any]) -> str:
    if path in _CHOICES:
        return "one of " + ", ".join(f"`{c}`" for c in _CHOICES[path])
    if path in _RANGES:
        lo, hi = _RANGES[path]
        return f"{lo:g} to {hi:g}"
    if entry.get("type") == "list":
        return "a list of text (or comma-separated text)"
    if path.startswith("retention_days."):
        return "whole days, -1 = keep for ever"
    return {"bool": "true or false", "string": "text", "int": "a whole number",
            "float": "a number"}.get(entry.get("type", ""), "any")


def _settings(schema: dict[str, Any], english: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, entry in schema.items():
        path = prefix + key
        en = english.get(key, {}) if isinstance(english, dict) else {}
        if entry.get("type") == "object":
            yield f"\n## `{path}` — {en.get('description', key)} / {entry.get('description', '')}\n"
            for text in (en.get("hint"), entry.get("hint")):
                if text:
                    yield f"{text}\n"
            yield from _settings(entry.get("items", {}), en, path + ".")
            continue
        yield (f"\n### `{path}`\n\n- type `{entry.get('type')}`, default {_value(entry.get('default'))}; "
               f"accepts {_accepts(path, entry)}")
        yield f"- **{en.get('description', key)}**" + (f" — {en['hint']}" if en.get("hint") else "")
        yield f"- **{entry.get('description', key)}**" + (f" — {entry['hint']}" if entry.get("hint") else "")


def render() -> str:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    english = json.loads(ENGLISH.read_text(encoding="utf-8"))["config"]
    top = {k: v for k, v in schema.items() if v.get("type") != "object"}
    sections = {k: v for k, v in schema.items() if v.get("type") == "object"}
    text = "\n".join([INTRO, "## Top level", *_settings(top, english), *_settings(sections, english)])
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/configuration.md is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print("docs/configuration.md is out of date: run python -m devtools.config_docs", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
