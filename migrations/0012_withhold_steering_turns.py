"""Turns that would steer the bot are withheld once, when recorded.

The reader used to judge every raw turn it was about to show
(``instructions.instruction_reason``) on every read; now the recorder
withholds such a turn before storing it (``recalling.bot_lines.withhold``),
so it is never indexed, found or shown. This migration judges the turns
recorded before: a person's or a tool's turn that is not withheld yet and
reads as an instruction, a marker or an accusation is withheld. Its
keyword and vector rows stay until their namespaces are rebuilt; the reader
never loads a withheld turn (``storing.turns.shown_turns_among``).

A reply of the bot's (shown as the bot's since this release) is judged on
its first 300 characters, as the recorder judges it.

The rule is the plugin's own (loaded from ``astrbot_plugin_ltm/instructions.py``,
which imports only the standard library): it is a judgement that should be
the current one, not a copy frozen here. About 0.1 ms a turn: 10 s for
100,000 turns, once.
"""

import importlib.util
import json
from pathlib import Path

RULE = Path(__file__).resolve().parent.parent / "astrbot_plugin_ltm" / "instructions.py"
BATCH = 5000
BOT_JUDGED_CHARS = 300  # recalling.bot_lines.BOT_JUDGED_CHARS
BOT_LABEL = "bot (you)"  # recalling.bot_lines.BOT_LABEL


def _instruction_reason():
    spec = importlib.util.spec_from_file_location("ltm_migration_instructions", RULE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.instruction_reason


def turn_text(source_type: str, content: dict, speaker: str | None) -> str:
    """storing.turns.turn_text: what the model would be shown."""
    if source_type == "tool_result":
        who, said = f"tool {content.get('tool', '?')}", str(content.get("result", ""))
    else:
        who, said = speaker or "someone", str(content.get("text", ""))
    return " ".join(f"{who}: {said}".split())


def upgrade(conn) -> None:
    reason = _instruction_reason()
    last = 0
    while True:
        rows = conn.execute(
            "SELECT id, source_type, source_role, content, sender_name, sender_id FROM ltm_events "
            "WHERE id > ? AND source_role IN ('user', 'tool', 'assistant') AND NOT withheld ORDER BY id LIMIT ?",
            (last, BATCH)).fetchall()
        if not rows:
            return
        last = rows[-1][0]
        steering = []
        for rowid, source_type, role, content, sender_name, sender_id in rows:
            try:
                parsed = json.loads(content) if content else {}
            except ValueError:
                continue
            if not isinstance(parsed, dict):
                continue
            bot = role == "assistant"
            said = turn_text(source_type, parsed, BOT_LABEL if bot else sender_name or sender_id)
            if reason(said[:BOT_JUDGED_CHARS] if bot else said):
                steering.append((rowid,))
        conn.executemany("UPDATE ltm_events SET withheld = 1 WHERE id = ?", steering)
