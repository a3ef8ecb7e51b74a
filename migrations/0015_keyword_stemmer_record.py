"""Which stemmer built the keyword rows.

``ltm_index_builds``: one row per derived index whose contents depend on
something outside the database; for now ``keywords``, the stemmer that made
the English tokens of ``ltm_items_fts`` and ``ltm_events_fts`` (``text.
KEYWORD_STEMMER``: "snowballstemmer 3.1", or "none" when the package is
missing). At start the plugin compares it with the stemmer it has and
rebuilds both tables when they differ (``storing.keyword_rows.match_stemmer``),
so rows built without stems never silently miss stemmed queries, or the
other way round.

The rows that exist now were built by the stemmer installed now, when there
is one (requirements.txt holds it to one minor release). Without one, rows
that exist were stemmed by a stemmer since removed: recorded as "unknown",
which the next start rebuilds; no rows at all were built by none. A new table
and one row: instant on any store.
"""

import importlib.util
from datetime import UTC, datetime
from pathlib import Path

TEXT = Path(__file__).resolve().parent.parent / "astrbot_plugin_ltm" / "text.py"
UNKNOWN = "unknown"


def _stemmer() -> tuple[str, str]:
    """(the stemmer installed now, the name of none) from the plugin's text.py."""
    spec = importlib.util.spec_from_file_location("ltm_migration_0015_text", TEXT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.KEYWORD_STEMMER, module.NO_STEMMER


def upgrade(conn) -> None:
    conn.execute(
        """CREATE TABLE ltm_index_builds (
            name VARCHAR(64) NOT NULL PRIMARY KEY,
            built_with VARCHAR(128) NOT NULL,
            built_at DATETIME NOT NULL
        )""")
    stemmer, none = _stemmer()
    if stemmer == none:
        rows = conn.execute("SELECT EXISTS (SELECT 1 FROM ltm_items_fts) OR EXISTS (SELECT 1 FROM ltm_events_fts)")
        stemmer = UNKNOWN if rows.fetchone()[0] else none
    conn.execute("INSERT INTO ltm_index_builds (name, built_with, built_at) VALUES ('keywords', ?, ?)",
                 (stemmer, datetime.now(UTC).replace(tzinfo=None).isoformat(" ")))
