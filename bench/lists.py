"""The dashboard's lists at scale: what each item, event and audit list
request costs, and whether its SQL reads an index or the whole table.

:func:`measure_lists` sends a matrix of list requests (:func:`matrix`)
through :class:`astrbot_plugin_ltm.doors.api.MemoryAPI` the way the dashboard
routes do (plain query-string mappings, each answer checked for success),
times each one ``repeats`` times, and records every SQL statement the API
executed for it (SQLAlchemy's ``before_cursor_execute``). Each distinct
statement is then explained (``EXPLAIN QUERY PLAN`` with its own
parameters) and run once more, timed, on a plain ``sqlite3`` connection to
the same file, and :func:`plan_problems` sorts its plan steps:

- ``full_scans``: ``SCAN ltm_…`` of a table with no index, integer primary
  key or virtual-table index behind it — every row read, whatever page is
  asked for (count queries included: a count may walk an index, not the
  table); and ``BLOOM FILTER ON ltm_…``, which SQLite (3.38+, given
  ``ANALYZE`` statistics) builds by reading the whole table before a join;
- ``temp_sorts``: ``USE TEMP B-TREE FOR … ORDER BY`` in a row query — every
  matching row read and sorted before the first one is returned (count
  queries are not ordered). Not when every table its part of the statement
  reads (a subquery's, a union's arm) is searched by a key column or the
  rowid: then only the rows it named are sorted;
- ``ignored_ids``: a statement that names its rows (``<table>.id IN (…)``)
  but reads the table through another index, i.e. every row of a scope or
  status instead of the few it asked for; also a statement that names rows
  by a key (``id``, ``memory_id``, … ``IN (…)``, its table unsaid) and
  searches a table by a status or a type alone: every active memory or
  every summary of the store, for a few;
- ``walks`` (reported, not a problem): a ``SCAN`` along an index, or along
  the table in rowid order when that is the requested order (``ORDER BY
  <table>.id``), that delivers the ``ORDER BY`` of a ``LIMIT``-ed row query,
  so it stops after the page. Marked ``filtered`` when the statement has
  conditions the walk tests row by row: then it reads as many rows as it
  takes to find a page of matches — all of them when the value is rare;
- ``rank_sorts`` (reported, not a problem): the keyword index's matches
  sorted by relevance (``ORDER BY bm25(…)``/``rank``, in a statement with
  ``MATCH``). Relevance is computed per match, so no index can deliver it;
  its cost is the number of matches.

Each statement's own cost (``ms``, ``vm_kinstr``: thousands of SQLite
virtual-machine instructions to run it to its end, ``rows``) is recorded
too: it shows the work a plan's text does not, such as a filtered walk that
finds few matches, or an index search over a whole big scope.

Used by ``bench/scale.py`` (phase "lists") and ``tests/test_list_plans.py``;
``report(result, plans=True)`` prints every statement with its plan and
cost. Timings are printed, never asserted.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import event
from sqlalchemy import text as sql

PROBLEM_KINDS = ("full_scans", "temp_sorts", "ignored_ids")
REPORTED_KINDS = ("walks", "rank_sorts")


# -- the requests --------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    name: str
    method: str  # a MemoryAPI method: list_items, list_events or audit_log
    query: Mapping[str, str]


def matrix(big_scope: tuple[str, str], small_scope: tuple[str, str] | None, session_id: str,
           search_words: Sequence[str], memory_id: str | None = None, item_type: str = "preference",
           rare_action: str = "status", rare_actor: str = "operator:nobody") -> list[Request]:
    """The list requests of the dashboard worth knowing the cost of in a
    store with one big scope: every sort, every indexed filter, a deep
    page, text search, and the event and audit lists with their filters."""
    kind, big = big_scope
    scoped = {"scope": kind, "scope_id": big}
    small = {"scope": small_scope[0], "scope_id": small_scope[1]} if small_scope else None
    sorts = ("updated", "confidence", "importance", "created", "least_used", "most_used")
    out = [Request("items", "list_items", {})]
    out += [Request(f"items sort={s}", "list_items", {"sort": s}) for s in sorts[1:]]
    out += [Request(f"items status={s}", "list_items", {"status": s}) for s in ("active", "shadow", "pending")]
    out += [
        Request("items status=active sort=confidence", "list_items", {"status": "active", "sort": "confidence"}),
        Request("items status=active sort=least_used", "list_items", {"status": "active", "sort": "least_used"}),
        Request(f"items type={item_type}", "list_items", {"type": item_type}),
        Request("items min_confidence=0.9", "list_items", {"min_confidence": "0.9"}),
        Request("items min_confidence=0.9 sort=confidence", "list_items",
                {"min_confidence": "0.9", "sort": "confidence"}),
    ]
    out += [Request(f"items big scope sort={s}", "list_items", {**scoped, "sort": s}) for s in sorts]
    out.append(Request("items big scope status=active", "list_items", {**scoped, "status": "active"}))
    if small:
        out.append(Request("items small scope", "list_items", small))
        out.append(Request("items small scope status=active", "list_items", {**small, "status": "active"}))
    for word in search_words:
        out.append(Request(f"items q={word}", "list_items", {"q": word}))
        out.append(Request(f"items q={word} big scope", "list_items", {"q": word, **scoped}))
        out.append(Request(f"items q={word} status=active", "list_items", {"q": word, "status": "active"}))
    out.append(Request("items page 200 of 50", "list_items", {"page": "200", "page_size": "50"}))
    out.append(Request("items big scope page 200 of 50", "list_items",
                       {**scoped, "page": "200", "page_size": "50"}))
    out += [
        Request("events", "list_events", {}),
        Request("events status=done", "list_events", {"status": "done"}),
        Request("events status=pending", "list_events", {"status": "pending"}),
        Request("events big scope", "list_events", scoped),
        Request("events session_id", "list_events", {"session_id": session_id}),
        Request("events page 200 of 50", "list_events", {"page": "200", "page_size": "50"}),
        Request("audit", "audit_log", {}),
        Request("audit action=create", "audit_log", {"action": "create"}),
        Request(f"audit action={rare_action}", "audit_log", {"action": rare_action}),
        Request("audit big scope", "audit_log", scoped),
    ]
    if small:
        out.append(Request("audit small scope", "audit_log", small))
    if memory_id:
        out.append(Request("audit memory_id", "audit_log", {"memory_id": memory_id}))
    out += [
        Request("audit session_id", "audit_log", {"session_id": session_id}),
        Request(f"audit actor={rare_actor}", "audit_log", {"actor": rare_actor}),
        Request("audit page 200 of 50", "audit_log", {"page": "200", "page_size": "50"}),
    ]
    return out


# -- plans ---------------------------------------------------------------------------


_COUNT = re.compile(r"^\s*SELECT\s+count\(\*\)", re.IGNORECASE)
_STEP = re.compile(r"^(SCAN|SEARCH) (\w+)(?: AS (\w+))?(.*)$")
_BLOOM = re.compile(r"^BLOOM FILTER ON (\w+)")
_TEMP_SORT = re.compile(r"USE TEMP B-TREE FOR (?:.* )?ORDER BY")
_RANK_ORDER = re.compile(r"\bMATCH\b.*\bORDER BY\s+(?:bm25\(|rank\b)", re.IGNORECASE | re.DOTALL)
# Columns that sort the whole store into a few classes: an index searched by
# them alone reads a class of every scope.
_CLASS_COLUMNS = {"status", "type", "visibility", "withheld", "source_role", "extraction_status"}
_KEY_COLUMNS = {"id", "rowid", "memory_id", "event_id", "item_id", "event_rowid"}
_NAMED_ROWS = re.compile(r"(?<![\w.])(?:id|memory_id|event_id|item_id|event_rowid) IN \(")
_KEYWORDS = {"WHERE", "ON", "JOIN", "CROSS", "LEFT", "INNER", "OUTER", "NATURAL", "ORDER", "GROUP", "LIMIT",
             "USING", "UNION", "INDEXED", "NOT", "AS"}


def is_count(statement: str) -> bool:
    return bool(_COUNT.match(statement))


def explain(conn: sqlite3.Connection, statement: str, params: Any = ()) -> list[str]:
    """The plan steps of ``statement``, one string each, indented by depth."""
    rows = conn.execute("EXPLAIN QUERY PLAN " + statement, params or ()).fetchall()
    depth = {0: -1}
    steps = []
    for node, parent, _, detail in rows:
        depth[node] = depth.get(parent, -1) + 1
        steps.append("  " * depth[node] + detail)
    return steps


def _tables(statement: str) -> dict[str, str]:
    """Name in the plan -> ``ltm_`` table: the tables and their aliases
    (SQLite's plan names an aliased table by its alias)."""
    found: dict[str, str] = {}
    for table, alias in re.findall(r"\b(?:FROM|JOIN)\s+(ltm_\w+)(?:\s+(?:AS\s+)?(\w+))?", statement, re.IGNORECASE):
        found[table] = table
        if alias and alias.upper() not in _KEYWORDS:
            found[alias] = table
    return found


def _orders_by_rowid(statement: str, names: str) -> bool:
    """``ORDER BY <table>.id`` (its rowid) first."""
    return bool(re.search(rf"\bORDER BY\s+(?:{names})\.id\b", statement))


def _by_class_alone(rest: str) -> bool:
    """An index search (``rest``: its plan step after the table) constrained
    by class columns only (``_CLASS_COLUMNS``)."""
    constrained = re.search(r"USING (?:COVERING )?INDEX \w+ \(([^()]*)\)\s*$", rest)
    searched = set(re.findall(r"(\w+)\s*[=<>]", constrained.group(1))) if constrained else set()
    return bool(searched) and searched <= _CLASS_COLUMNS


def _tested(statement: str, names: str, rest: str) -> list[str]:
    """The columns of the WHERE clause that a walk with ``rest`` (its plan
    step after the table) tests row by row: those its index search does not
    constrain."""
    where = re.search(r"\bWHERE\s+(.*?)(?:\bORDER BY\b|\bLIMIT\b|\bGROUP BY\b|$)", statement, re.DOTALL)
    if not where:
        return []
    columns = re.findall(rf"(?<![\w.])\+?(?:{names})\.(\w+)\s*(?:=|IS\b|>|<|IN\b|LIKE\b)", where.group(1))
    constrained = re.search(r"\(([^()]*)\)\s*$", rest)
    searched = set(re.findall(r"(\w+)\s*[=<>]", constrained.group(1))) if constrained else set()
    return [c for c in dict.fromkeys(columns) if c not in searched]


def plan_problems(statement: str, plan: Iterable[str]) -> dict[str, list[str]]:
    """The plan steps of one statement, sorted by kind: ``full_scans``,
    ``temp_sorts`` and ``ignored_ids`` (problems), ``walks`` and
    ``rank_sorts`` (reported; see the module docstring). Scans and searches
    are looked at for ``ltm_`` tables only (by name or alias); temp sorts in
    any row query."""
    plan = list(plan)
    steps = [s.strip() for s in plan]
    found: dict[str, list[str]] = {k: [] for k in (*PROBLEM_KINDS, *REPORTED_KINDS)}
    flat = " ".join(statement.split())
    tables = _tables(flat)
    count = is_count(flat)
    ranked = bool(_RANK_ORDER.search(flat))
    sorts = [s for s in steps if _TEMP_SORT.search(s)]
    ordered_page = not count and not sorts and " LIMIT " in f" {flat} "
    for step in steps:
        bloom = _BLOOM.match(step)
        if bloom and (bloom.group(1) in tables or bloom.group(1).startswith("ltm_")):
            found["full_scans"].append(step + "  (built by reading the whole table)")
            continue
        m = _STEP.match(step)
        if not m:
            continue
        verb, name, alias, rest = m.groups()
        table = tables.get(alias or "") or tables.get(name) or (name if name.startswith("ltm_") else None)
        if table is None:
            continue
        names = "|".join(re.escape(n) for n, t in tables.items() if t == table) or re.escape(name)
        named_but_not_used = (not ranked and "INTEGER PRIMARY KEY" not in rest and "VIRTUAL TABLE" not in rest
                              and re.search(rf"(?<![\w.])(?:{names})\.id IN \(", flat))
        if named_but_not_used or (verb == "SEARCH" and _NAMED_ROWS.search(flat) and _by_class_alone(rest)):
            found["ignored_ids"].append(step)
        tested = _tested(flat, names, rest) if ordered_page else []
        note = f"  (filtered: tests {', '.join(tested)} row by row)" if tested else ""
        if verb == "SEARCH" and "AUTOMATIC" in rest:
            found["full_scans"].append(step + "  (an index built by reading the whole table)")
            continue
        if verb == "SEARCH":
            if tested and "USING" in rest and "INTEGER PRIMARY KEY" not in rest:
                found["walks"].append(step + note)
            continue
        if "VIRTUAL TABLE INDEX" in rest or "USING INTEGER PRIMARY KEY" in rest:
            continue
        indexed = "USING INDEX" in rest or "USING COVERING INDEX" in rest
        if ordered_page and indexed:
            if tested:  # along an index in the asked order: fine unless it filters
                found["walks"].append(step + note)
        elif ordered_page and _orders_by_rowid(flat, names):
            found["walks"].append(step + (note or "  (rowid order)"))
        elif not indexed:
            found["full_scans"].append(step)
        # else: an index read whole (a count, or no LIMIT): its cost is in the figures
    if not count:
        for at, step in enumerate(plan):
            if _TEMP_SORT.search(step) and (ranked or not _sorts_rows_found_by_key(plan, at, _key_lists(flat))):
                found["rank_sorts" if ranked else "temp_sorts"].append(step.strip())
    return found


def _depth(step: str) -> int:
    return (len(step) - len(step.lstrip(" "))) // 2  # explain() indents two spaces a level


def _key_lists(statement: str) -> set[str]:
    """The names a plan gives the lists of keys a statement passes (``json_each``)."""
    aliases = re.findall(r"json_each\([^()]*\)\s+(?:AS\s+)?(\w+)", statement, re.IGNORECASE)
    return {"json_each", *(a for a in aliases if a.upper() not in _KEYWORDS)}


def _sorts_rows_found_by_key(plan: Sequence[str], at: int, key_lists: set[str]) -> bool:
    """The sort at ``plan[at]`` orders only rows found by key: every table
    its own part of the statement reads (the steps beside it, and the
    searches of a MULTI-INDEX OR beside it) is searched by a key column or
    the rowid. A sort of a scope's rows, or a class's, is not."""
    depth = _depth(plan[at])
    start = end = at
    while start > 0 and _depth(plan[start - 1]) >= depth:
        start -= 1
    while end + 1 < len(plan) and _depth(plan[end + 1]) >= depth:
        end += 1
    reads, in_or = [], False
    for step in plan[start:end + 1]:
        d, bare = _depth(step), step.strip()
        if d == depth:
            in_or = bare.startswith("MULTI-INDEX OR")
        if (d == depth or (in_or and d == depth + 2)) and (m := _STEP.match(bare)):
            reads.append((m.group(2), m.group(4)))
    return bool(reads) and all(name in key_lists or _by_key(rest) for name, rest in reads)


def _by_key(rest: str) -> bool:
    """A search (``rest``: its plan step after the table) by the rowid or a
    key column; never an automatic index, built by reading the table."""
    if "AUTOMATIC" in rest:
        return False
    if "INTEGER PRIMARY KEY" in rest:
        return True
    constrained = re.search(r"\(([^()]*)\)\s*$", rest)
    return constrained is not None and bool(set(re.findall(r"(\w+)\s*[=<>]", constrained.group(1))) & _KEY_COLUMNS)


def _vm_steps(conn: sqlite3.Connection, statement: str, params: Any) -> tuple[int, float, int]:
    """(virtual-machine instructions in thousands, ms, rows) to run
    ``statement`` to its end: the work done, whatever the plan says."""
    ticks = [0]

    def tick() -> int:
        ticks[0] += 1
        return 0

    conn.set_progress_handler(tick, 1000)
    try:
        start = time.perf_counter()
        rows = conn.execute(statement, params or ()).fetchall()
        ms = (time.perf_counter() - start) * 1000
    finally:
        conn.set_progress_handler(None, 0)
    return ticks[0], ms, len(rows)


# -- capturing statements --------------------------------------------------------------


class StatementLog:
    """Every statement the SQLAlchemy engines send while :attr:`current`
    names a request, de-duplicated by text and parameters; also those sent
    straight to a pooled ``sqlite3`` connection's cursor (the read path's
    hot statements, storing.driver_rows), traced with their values inlined."""

    def __init__(self, *sync_engines: Any) -> None:
        self.sync_engines = sync_engines
        self.current: str | None = None
        self.statements: dict[str, dict[tuple[str, str], tuple[str, Any]]] = {}
        self._traced: list[sqlite3.Connection] = []

    def _before(self, conn, cursor, statement, parameters, context, executemany) -> None:
        if self.current is None or executemany:
            return
        key = (statement, repr(parameters))
        self.statements.setdefault(self.current, {}).setdefault(key, (statement, parameters))

    def _trace(self, statement: str) -> None:
        if self.current is not None:
            self.statements.setdefault(self.current, {}).setdefault((statement, "()"), (statement, ()))

    def _checkout(self, dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if isinstance(dbapi_connection, sqlite3.Connection) and not any(c is dbapi_connection for c in self._traced):
            dbapi_connection.set_trace_callback(self._trace)
            self._traced.append(dbapi_connection)

    def __enter__(self) -> StatementLog:
        for sync_engine in self.sync_engines:
            event.listen(sync_engine, "before_cursor_execute", self._before)
            event.listen(sync_engine.pool, "checkout", self._checkout)
        return self

    def __exit__(self, *exc: object) -> None:
        for sync_engine in self.sync_engines:
            event.remove(sync_engine, "before_cursor_execute", self._before)
            event.remove(sync_engine.pool, "checkout", self._checkout)
        # The traces stay set (and record nothing once ``current`` is None):
        # unset from this thread while a pool thread is inside a statement,
        # sqlite3_trace_v2 would wait for the connection as the trace waits for the GIL.
        self.current = None

    def of(self, name: str) -> list[tuple[str, Any]]:
        return list(self.statements.get(name, {}).values())


# -- measuring -------------------------------------------------------------------------


@dataclass
class Outcome:
    ms: list[float] = field(default_factory=list)
    total: int | None = None
    rows: int | None = None
    errors: list[str] = field(default_factory=list)


def _check(response: Any, request: Request) -> tuple[int | None, int | None, str | None]:
    """(total, rows on the page, error) of one API answer."""
    status = getattr(response, "status", 200)
    body = getattr(response, "body", None)
    if body is None:  # a method called directly: its data
        data = response
    elif status != 200 or not isinstance(body, dict) or body.get("status") != "ok":
        message = body.get("message") if isinstance(body, dict) else body
        return None, None, f"{request.name}: HTTP {status}: {message}"
    else:
        data = body.get("data")
    if not isinstance(data, dict) or "total" not in data:
        return None, None, f"{request.name}: unexpected answer {str(data)[:200]}"
    listed = next((v for k, v in data.items() if k in ("items", "events", "entries")), None)
    return data["total"], len(listed) if isinstance(listed, list) else None, None


async def _send(api: Any, request: Request) -> Any:
    method = getattr(api, request.method)
    if hasattr(api, "call"):
        return await api.call(method, dict(request.query))
    return await method(dict(request.query))


def _pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values), q)) if values else None


async def pick(engine: Any, big_scope: tuple[str, str]) -> dict[str, Any]:
    """What the matrix needs from the store when the caller does not say:
    the scope with the fewest items (``small_scope``), the longest word of
    the big scope's newest fact (``search_words``), that item's
    ``memory_id``."""
    async with engine.db.read() as session:
        small = (await session.execute(sql(
            "SELECT scope, scope_id FROM ltm_items WHERE NOT (scope = :k AND scope_id = :i) "
            "GROUP BY scope, scope_id ORDER BY count(*), scope_id LIMIT 1"),
            {"k": big_scope[0], "i": big_scope[1]})).first()
        newest = (await session.execute(sql(
            "SELECT memory_id, fact FROM ltm_items WHERE scope = :k AND scope_id = :i "
            "ORDER BY updated_at DESC LIMIT 1"),
            {"k": big_scope[0], "i": big_scope[1]})).first()
    words = [w for w in (newest[1] if newest else "").split() if w.isalpha() and len(w) > 3]
    return {"small_scope": tuple(small) if small else None,
            "search_words": [max(words, key=len)] if words else [],
            "memory_id": newest[0] if newest else None}


async def measure_lists(engine: Any, api: Any, big_scope: tuple[str, str], session_id: str, repeats: int = 20,
                        *, requests: Sequence[Request] | None = None, **choices: Any) -> dict[str, Any]:
    """Time the list matrix through ``api`` (a MemoryAPI: through its
    ``call`` envelope when it has one) and explain every statement it runs.

    ``requests`` replaces the matrix; ``choices`` are passed to
    :func:`matrix` (``small_scope``, ``search_words``, ``memory_id``,
    ``item_type``, ``rare_action``, ``rare_actor``), and what is not given of
    the first three is picked from the store (:func:`pick`).

    Returns ``{"requests": {name: {...}}, "errors": [...], "statements": n}``;
    each request has ``method``, ``query``, ``p50_ms``, ``p95_ms``, ``total``
    and ``rows`` (of the answer), ``statements`` (sql, plan, and the
    statement's own cost run alone: ``ms``, ``vm_kinstr``, ``rows``) and the
    plan steps per kind of :func:`plan_problems` (``full_scans``,
    ``temp_sorts``, ``ignored_ids``, ``walks``, ``rank_sorts``; each entry
    ``"<step>  ← <statement>"``).
    """
    if requests is None:
        if any(choices.get(k) is None for k in ("small_scope", "search_words", "memory_id")):
            picked = await pick(engine, big_scope)
            choices = {**picked, **{k: v for k, v in choices.items() if v is not None}}
        requests = matrix(big_scope, session_id=session_id, **choices)
    outcomes = {r.name: Outcome() for r in requests}
    errors: list[str] = []

    async def once(request: Request) -> float | None:
        """One request, timed; None (and an error kept) when it failed."""
        outcome = outcomes[request.name]
        start = time.perf_counter()
        try:
            response = await _send(api, request)
        except Exception as exc:  # a method called directly raised
            outcome.errors.append(f"{request.name}: {type(exc).__name__}: {exc}")
            return None
        ms = (time.perf_counter() - start) * 1000
        total, rows, problem = _check(response, request)
        if problem:
            outcome.errors.append(problem)
            return None
        outcome.total, outcome.rows = total, rows
        return ms

    # One untimed pass that records the statements, then the timed passes
    # (round robin, so a burst of noise on the machine spreads over all).
    # The text search runs on the read engine (Database.run), the rest on AstrBot's.
    log = StatementLog(engine.db.sql_engine.sync_engine, engine.db.read_pool)
    with log:
        for request in requests:
            log.current = request.name
            await once(request)
            log.current = None
    for _ in range(repeats):
        for request in requests:
            if not outcomes[request.name].errors and (ms := await once(request)) is not None:
                outcomes[request.name].ms.append(ms)

    result: dict[str, Any] = {"requests": {}, "errors": errors, "statements": 0}
    conn = sqlite3.connect(Path(engine.db.path).resolve().as_uri() + "?mode=ro", uri=True)
    try:
        for request in requests:
            outcome = outcomes[request.name]
            errors += outcome.errors[:1]
            entry: dict[str, Any] = {
                "method": request.method, "query": dict(request.query),
                "p50_ms": _pct(outcome.ms, 50), "p95_ms": _pct(outcome.ms, 95),
                "total": outcome.total, "rows": outcome.rows, "statements": [],
                **{k: [] for k in (*PROBLEM_KINDS, *REPORTED_KINDS)},
            }
            for statement, params in log.of(request.name):
                if not statement.lstrip().upper().startswith(("SELECT", "WITH")):
                    continue
                plan = explain(conn, statement, params)
                kinstr, ms, rows = _vm_steps(conn, statement, params)
                entry["statements"].append({"sql": one_line(statement), "plan": plan, "ms": ms,
                                            "vm_kinstr": kinstr, "rows": rows, "count": is_count(statement)})
                for kind, steps in plan_problems(statement, plan).items():
                    entry[kind] += [f"{step}  ← {one_line(statement, 200)}" for step in steps]
                result["statements"] += 1
            result["requests"][request.name] = entry
    finally:
        conn.close()
    return result


def one_line(statement: str, limit: int | None = None) -> str:
    """A statement on one line; with ``limit``, long column lists and IN
    lists elided, then cut to ``limit`` characters."""
    flat = " ".join(statement.split())
    flat = re.sub(r"\(\?(?:, \?){8,}\)", "(?, …)", flat)  # long IN lists
    if limit is not None:
        flat = re.sub(r"^SELECT (?:\w+\.\w+, ){4,}\w+\.\w+ FROM ", "SELECT … FROM ", flat)
    return flat if limit is None or len(flat) <= limit else flat[: limit - 1] + "…"


def summary(result: Mapping[str, Any]) -> dict[str, Any]:
    """The compact figures for a benchmark's JSON line: the slowest
    requests, and every problem as ``"<request>: <step>  ← <statement>"``."""
    requests = result["requests"]
    timed = {n: r for n, r in requests.items() if r["p95_ms"] is not None}
    slowest = sorted(timed, key=lambda n: timed[n]["p95_ms"], reverse=True)
    return {
        "lists_requests": len(requests),
        "lists_p50_ms_median": _pct([r["p50_ms"] for r in timed.values()], 50),
        "lists_p95_ms_max": timed[slowest[0]]["p95_ms"] if slowest else None,
        "lists_slowest": [f"{n}: {timed[n]['p95_ms']:.1f} ms" for n in slowest[:3]],
        **{f"lists_{kind}": [f"{n}: {s}" for n, r in requests.items() for s in r[kind]] for kind in PROBLEM_KINDS},
        "lists_errors": list(result["errors"]),
    }


def compact(result: Mapping[str, Any]) -> dict[str, Any]:
    """Per request: p50/p95 ms, the answer's total, the heaviest statement's
    cost run alone (thousands of VM instructions, ms) and its plan steps
    worth a look (problems, filtered walks)."""
    out = {}
    for name, r in result["requests"].items():
        heaviest = max(r["statements"], key=lambda s: s["vm_kinstr"], default=None)
        out[name] = {
            "p50_ms": r["p50_ms"], "p95_ms": r["p95_ms"], "total": r["total"],
            "heaviest_kinstr": heaviest["vm_kinstr"] if heaviest else None,
            "heaviest_ms": heaviest["ms"] if heaviest else None,
            **{kind: r[kind] for kind in (*PROBLEM_KINDS, "walks") if r[kind]},
        }
    return out


def table(details: Mapping[str, Mapping[str, Any]]) -> str:
    """The per-request lines of :func:`compact`'s output."""
    lines = [f"  {'request':<44}{'p50 ms':>9}{'p95 ms':>9}{'total':>10}{'kinstr':>9}  plan"]
    for name, r in details.items():
        flags = [f"{len(r[k])} {k.replace('_', ' ')}" for k in (*PROBLEM_KINDS, "walks") if r.get(k)]
        cells = ["—" if r[k] is None else format(r[k], f) for k, f in
                 (("p50_ms", ".2f"), ("p95_ms", ".2f"), ("total", ",d"), ("heaviest_kinstr", ",d"))]
        lines.append(f"  {name:<44}{cells[0]:>9}{cells[1]:>9}{cells[2]:>10}{cells[3]:>9}  "
                     f"{', '.join(flags) or 'indexed'}")
    return "\n".join(lines)


def report(result: Mapping[str, Any], plans: bool = False) -> str:
    """A table of the requests: p50/p95, total, problems; with ``plans``
    every statement's plan and own cost."""
    lines = [f"{'request':<44}{'p50 ms':>9}{'p95 ms':>9}{'total':>10}  plan"]
    for name, r in result["requests"].items():
        flags = [f"{len(r[k])} {k.replace('_', ' ')}" for k in (*PROBLEM_KINDS, *REPORTED_KINDS) if r[k]]
        total = "—" if r["total"] is None else f"{r['total']:,}"
        p50 = "—" if r["p50_ms"] is None else f"{r['p50_ms']:.2f}"
        p95 = "—" if r["p95_ms"] is None else f"{r['p95_ms']:.2f}"
        lines.append(f"{name:<44}{p50:>9}{p95:>9}{total:>10}  {', '.join(flags) or 'indexed'}")
        if plans:
            for s in r["statements"]:
                lines.append(f"    {s['ms']:8.2f} ms {s['vm_kinstr']:>8,}k instr {s['rows']:>5} rows  "
                             f"{one_line(s['sql'], 150)}")
                lines += [f"        {step}" for step in s["plan"]]
    heavy = sorted(((s["vm_kinstr"], s["ms"], name, s["sql"]) for name, r in result["requests"].items()
                    for s in r["statements"]), reverse=True)[:5]
    if heavy:
        lines.append("heaviest statements (run alone):")
        lines += [f"  {k:>8,}k instr {ms:8.2f} ms  {name}: {one_line(q, 110)}" for k, ms, name, q in heavy]
    for problem in result["errors"]:
        lines.append(f"ERROR {problem}")
    return "\n".join(lines)
