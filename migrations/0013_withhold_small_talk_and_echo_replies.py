"""The bot's small talk and echoes are withheld once, when recorded.

The reader used to judge, on every read, whether a reply of the bot's it
was about to show was small talk ("OK.", "How nice!", "当然了") or only said
the person's message back ("So you live in Paris!"); now the recorder
withholds such a reply before storing it (``recalling.bot_lines.withhold``), so it
is never indexed, found or shown. This migration judges the replies
recorded before, by the same rules: fewer than 4 search tokens in its first
120 characters, or at least 80 % of its words those of the person's message
recorded just before it in the same conversation. Their keyword and vector
rows stay until their namespaces are rebuilt; the reader never loads a
withheld turn (``storing.turns.shown_turns_among``).

The words are a frozen copy of the plugin's ``search_tokens`` as the rules
were measured with it (astrbot_plugin_ltm/text.py at this release: NFKC,
lowercase, a CJK run as its bigrams, English words stemmed by
snowballstemmer when it is installed): a migration never loads a live
module, which may change after it (docs/decisions.md#d109). About 0.05 ms
a reply, once.
"""

import json
import re
import unicodedata

BATCH = 5000
SMALL_TALK_TOKENS = 4  # recalling.bot_lines.SMALL_TALK_TOKENS at this release
SMALL_TALK_CHARS = 120  # recalling.bot_lines.SMALL_TALK_CHARS
ECHO_SHARE = 0.8  # recalling.bot_lines.ECHO_SHARE

# text.py's _CJK_RANGES: kana, CJK extension A, unified and compatibility ideographs, hangul.
_CJK_RANGES = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF))
_CJK_CLASS = "".join(f"\\u{lo:04x}-\\u{hi:04x}" for lo, hi in _CJK_RANGES)
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
_TOKEN_RUN = re.compile(f"[{_CJK_CLASS}]+|[^\\W_{_CJK_CLASS}]+", re.UNICODE)


def _search_tokens():
    """text.search_tokens: the words, a CJK run as its overlapping
    bigrams (a lone character as itself), English words stemmed."""
    try:
        import snowballstemmer
    except ImportError:  # as text.py: English words as they are
        stemmer = None
    else:
        stemmer = snowballstemmer.stemmer("english")
    stems: dict[str, str] = {}

    def stem(word: str) -> str:
        if stemmer is None or not (word.isascii() and word.isalpha()):
            return word
        if word not in stems:
            stems[word] = str(stemmer.stemWord(word))
        return stems[word]

    def tokens(text: str) -> list[str]:
        words: list[str] = []
        for match in _TOKEN_RUN.finditer(unicodedata.normalize("NFKC", text).lower()):
            run = match.group(0)
            if _CJK_RUN.fullmatch(run):
                words.extend([run] if len(run) == 1 else (run[i : i + 2] for i in range(len(run) - 1)))
            else:
                words.append(run)
        return [stem(word) for word in words]

    return tokens


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
