"""Finding turns by their sentences and English words by their stems.

- A raw turn is now embedded sentence by sentence (``storing.turns.turn_passages``):
  its row in ``ltm_event_vectors`` holds one vector per sentence. The
  whole-turn vectors stored before are deleted: they are a cache, and the
  background fill embeds every turn again. The namespace files on disk are
  rebuilt too, as their metadata has no ``stride``.
- Keyword tokens of English words are now stems ("books" and "book" meet;
  ``text.stem``). Both keyword indexes are rewritten token by token with
  the same rule, repeated here so the migration stands alone: the stored
  tokens are the words lowercased, so no text is tokenised again.
"""

from functools import lru_cache

PREFIX_CHARS = 16  # storing.keyword_rows.scope_prefix: 8 bytes as hex
try:
    import snowballstemmer

    _STEMMER = snowballstemmer.stemmer("english")
except ImportError:
    _STEMMER = None


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    return _STEMMER.stemWord(word) if _STEMMER is not None and word.isascii() and word.isalpha() else word


def stemmed(tokens: str | None) -> str:
    return " ".join(stem(t) for t in (tokens or "").split())


def stemmed_scoped(tokens: str | None) -> str:
    return " ".join(t[:PREFIX_CHARS] + stem(t[PREFIX_CHARS:]) for t in (tokens or "").split())


STATEMENTS = [
    "DELETE FROM ltm_event_vectors",
    "CREATE VIRTUAL TABLE ltm_items_fts_new USING fts5(tokens, scoped, tokenize='unicode61')",
    """INSERT INTO ltm_items_fts_new (rowid, tokens, scoped)
       SELECT rowid, ltm_stemmed(tokens), ltm_stemmed_scoped(scoped) FROM ltm_items_fts""",
    "DROP TABLE ltm_items_fts",
    "ALTER TABLE ltm_items_fts_new RENAME TO ltm_items_fts",
    "CREATE VIRTUAL TABLE ltm_events_fts_new USING fts5(scoped, tokenize='unicode61')",
    """INSERT INTO ltm_events_fts_new (rowid, scoped)
       SELECT rowid, ltm_stemmed_scoped(scoped) FROM ltm_events_fts""",
    "DROP TABLE ltm_events_fts",
    "ALTER TABLE ltm_events_fts_new RENAME TO ltm_events_fts",
]


def upgrade(conn) -> None:
    conn.create_function("ltm_stemmed", 1, stemmed, deterministic=True)
    conn.create_function("ltm_stemmed_scoped", 1, stemmed_scoped, deterministic=True)
    for statement in STATEMENTS:
        conn.execute(statement)
