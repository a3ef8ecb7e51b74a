"""The operators' text search: FTS5 over the facts' keyword rows, in any
scope and any status (the reader's own search is indexes.keywords)."""

from __future__ import annotations

from sqlalchemy import Connection, text

from ..storing.keyword_rows import scope_prefix
from ..text import fts_match_expression, is_cjk

Scopes = list[tuple[str, str]] | None  # None: every scope (the plain tokens column)


def _terms(token: str, scopes: Scopes) -> list[str]:
    if scopes is None:
        return [token]
    return [scope_prefix(scope, scope_id) + token for scope, scope_id in dict.fromkeys(scopes)]


def _match(tokens: list[str], scopes: Scopes) -> str:
    """The MATCH of any token. A lone CJK character beside longer words
    ("猫 python") is a prefix: the bigrams it starts are found too."""
    words = [term for token in tokens if not _lone_cjk(token) for term in _terms(token, scopes)]
    lone = [term for token in tokens if _lone_cjk(token) for term in _terms(token, scopes)]
    parts = [p for p in (fts_match_expression(words), " OR ".join(f"{fts_match_expression([t])}*" for t in lone))
             if p]
    return f"{'tokens' if scopes is None else 'scoped'} : ({' OR '.join(parts)})"


def _lone_cjk(token: str) -> bool:
    return len(token) == 1 and is_cjk(token)


def _ranked(conn: Connection, match: str, rank: str, accept: str, params: dict[str, object],
            limit: int) -> list[tuple[int, float]]:
    """(item rowid, -bm25) of the best matches passing ``accept`` (SQL over
    ``x``), checked after ranking a few times the limit at a time: a join
    costs a lookup per match, tens of thousands at scale."""
    window = 4 * limit
    while True:
        # One statement: the window of best matches, how many there were
        # (the row whose first column is 0), and the ones that pass.
        rows = conn.execute(
            text(
                f"WITH top AS MATERIALIZED (SELECT rowid AS id, {rank} AS rank FROM ltm_items_fts "
                f"WHERE ltm_items_fts MATCH :q ORDER BY {rank} LIMIT :k) "
                "SELECT 0, (SELECT count(*) FROM top), NULL UNION ALL "
                "SELECT * FROM (SELECT 1, x.id, -top.rank FROM top CROSS JOIN ltm_items x ON x.id = top.id "
                f"WHERE {accept} ORDER BY top.rank LIMIT :lim)"
            ),
            {**params, "q": match, "k": window, "lim": limit},
        ).all()
        matched = next(row[1] for row in rows if row[0] == 0)
        ranked = sorted(((row[1], float(row[2])) for row in rows if row[0] == 1), key=lambda hit: -hit[1])
        if len(ranked) >= limit or matched < window or window >= 64 * limit:
            return ranked
        window *= 4  # too few passed: look further down the ranking


def search_facts(conn: Connection, tokens: list[str], scopes: Scopes, statuses: tuple[str, ...],
                 limit: int) -> list[tuple[int, float]]:
    """(item rowid, -bm25) of the best matches with one of ``statuses`` in
    ``scopes`` (None: every scope), best first."""
    if not tokens or scopes == [] or not statuses:
        return []
    marks = ", ".join(f":st{n}" for n in range(len(statuses)))
    rank = "bm25(ltm_items_fts, 1.0, 0.0)" if scopes is None else "bm25(ltm_items_fts, 0.0, 1.0)"
    # "+" keeps SQLite on the rowids: with an index on status it would
    # rather read every active item and test each against the id list.
    return _ranked(conn, _match(tokens, scopes), rank, f"+x.status IN ({marks})",
                   {f"st{n}": status for n, status in enumerate(statuses)}, limit)
