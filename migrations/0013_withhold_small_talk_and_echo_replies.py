"""The bot's small talk and echoes are withheld once, when recorded.

The reader used to judge, on every read, whether a reply of the bot's it
was about to show was small talk ("OK.", "How nice!", "当然了") or only said
the person's message back ("So you live in Paris!"); now the recorder
withholds such a reply before storing it (``storing.turns.withhold``), so it
is never indexed, found or shown. This migration judges the replies
recorded before, by the same rules: fewer than 4 search tokens in its first
120 characters, or at least 80 % of its words those of the person's message
recorded just before it in the same conversation. Their keyword and vector
rows stay until their namespaces are rebuilt; the reader never loads a
withheld turn (``storing.turns.shown_turns``).

The words are the plugin's own (``search_tokens``, loaded from
``astrbot_plugin_ltm/text.py``, which imports only the standard library and
snowballstemmer): the same tokens the rules were measured with. About
0.05 ms a reply, once.
"""

import importlib.util
import json
from pathlib import Path

TEXT = Path(__file__).resolve().parent.parent / "astrbot_plugin_ltm" / "text.py"
BATCH = 5000
SMALL_TALK_TOKENS = 4  # storing.turns.SMALL_TALK_TOKENS
SMALL_TALK_CHARS = 120  # storing.turns.SMALL_TALK_CHARS
ECHO_SHARE = 0.8  # storing.turns.ECHO_SHARE


def _search_tokens():
    spec = importlib.util.spec_from_file_location("ltm_migration_text", TEXT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.search_tokens


def _text(content) -> str:
    try:
        parsed = json.loads(content) if content else {}
    except ValueError:
        return ""
    return str(parsed.get("text", "")) if isinstance(parsed, dict) else ""


def upgrade(conn) -> None:
    tokens = _search_tokens()
    last = 0
    while True:
        # The message a reply answers is the event just before it, by primary key.
        rows = conn.execute(
            "SELECT x.id, x.content, p.content FROM ltm_events x LEFT JOIN ltm_events p ON p.id = x.id - 1 "
            "AND p.session_id IS x.session_id AND p.source_role = 'user' "
            "WHERE x.id > ? AND x.source_role = 'assistant' AND NOT x.withheld ORDER BY x.id LIMIT ?",
            (last, BATCH)).fetchall()
        if not rows:
            return
        last = rows[-1][0]
        unshown = []
        for rowid, content, message_content in rows:
            reply = _text(content)
            small_talk = len(tokens(reply[:SMALL_TALK_CHARS])) < SMALL_TALK_TOKENS
            said = set(tokens(reply))
            echo = message_content is not None and bool(said) and \
                len(said & set(tokens(_text(message_content)))) / len(said) >= ECHO_SHARE
            if small_talk or echo:
                unshown.append((rowid,))
        conn.executemany("UPDATE ltm_events SET withheld = 1 WHERE id = ?", unshown)
