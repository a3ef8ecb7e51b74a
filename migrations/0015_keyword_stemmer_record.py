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

from datetime import UTC, datetime
from importlib import metadata

UNKNOWN = "unknown"
NO_STEMMER = "none"  # text.NO_STEMMER, frozen


def _stemmer() -> tuple[str, str]:
    """(the stemmer installed now, the name of none), named as text.KEYWORD_STEMMER
    names it (a frozen copy: a migration never loads a live module)."""
    try:
        import snowballstemmer
    except ImportError:
        return NO_STEMMER, NO_STEMMER
    try:
        version = metadata.version("snowballstemmer")
    except metadata.PackageNotFoundError:
        version = getattr(snowballstemmer, "__version__", "?")
    return "snowballstemmer " + ".".join(version.split(".")[:2]), NO_STEMMER


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
