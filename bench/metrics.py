"""Metric and baseline code of the benchmarks, free of I/O so that it can be
checked by hand (tests/test_bench_metrics.py).

- evidence ids: LoCoMo's ``"D3:7"`` dialogue ids, normalised from the
  malformed forms found in the data (``"D8:6; D9:17"``, ``"D:11:26"``).
- evidence recall: the share of a question's gold turns that the injected
  text reaches; an injected memory reaches the turns it is evidenced by.
- answer words: the share of the gold answer's words found in the injected
  text. Evidence recall counts a turn reached even when the block shows
  only part of it, so a reader that cut turns short would gain on it while
  giving the model less to answer from; this figure would fall.
- BM25 (Okapi) and dense rankings over retrieval units, reciprocal-rank
  fusion, and a cut at a token budget measured like the plugin's reader.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from astrbot_plugin_ltm.text import query_tokens, search_tokens

# The plugin reader's frame, so that baseline blocks cost what ours would.
HEADER = "[Long-term Memory]"
FOOTER = "[End Memory]"

_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.I)


# -- evidence ids ---------------------------------------------------------------


def normalise_evidence(raw: Any) -> list[str]:
    """Dialogue ids in ``raw`` (a string or a list of strings), in order,
    without duplicates: ``"D8:6; D9:17"`` -> ``["D8:6", "D9:17"]``,
    ``"D:11:26"`` -> ``["D11:26"]``. Anything unreadable is dropped."""
    if raw is None:
        return []
    items = [raw] if isinstance(raw, str) else list(raw)
    out: dict[str, None] = {}
    for item in items:
        if isinstance(item, (list, tuple)):
            for sub in normalise_evidence(item):
                out.setdefault(sub, None)
            continue
        if not isinstance(item, str):
            continue
        for session, turn in _DIA_ID.findall(item):
            out.setdefault(f"D{int(session)}:{int(turn)}", None)
    return list(out)


# -- what an injected block reaches -----------------------------------------------

# Fields a later reader may use to say which events an injected line stands
# for (raw events injected as themselves, or provenance carried on the item).
_EVENT_FIELDS = ("event_id", "source_event_id")
_EVENT_LIST_FIELDS = ("event_ids", "evidence_event_ids", "source_event_ids", "evidence", "provenance")


def _field(item: Any, name: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


def _ids(value: Any) -> set[str]:
    if value is None:
        return set()
    if isinstance(value, str):
        return {value}
    if isinstance(value, Mapping):
        return _ids(value.get("event_ids") or value.get("events") or value.get("event_id"))
    if isinstance(value, Iterable):
        out: set[str] = set()
        for v in value:
            if isinstance(v, str):
                out.add(v)
            elif isinstance(v, Mapping) or _field(v, "event_id") is not None:
                out |= _ids(_field(v, "event_id"))
        return out
    return set()


def item_event_ids(item: Any, evidence: Mapping[str, Iterable[str]], known_events: Mapping[str, Any]) -> set[str]:
    """Event ids one injected entry reaches.

    ``evidence`` maps a memory id to the event ids linked to it in
    ltm_evidence (joined to ltm_events); ``known_events`` maps every
    recorded event id to what it stands for. An entry whose ``memory_id``
    is itself an event id (or ``"<kind>:<event id>"``) is a raw event
    injected as such; provenance fields on the entry are taken as given.
    """
    reached: set[str] = set()
    for name in _EVENT_FIELDS:
        reached |= _ids(_field(item, name))
    for name in _EVENT_LIST_FIELDS:
        reached |= _ids(_field(item, name))
    memory_id = _field(item, "memory_id")
    if isinstance(memory_id, str) and memory_id:
        if memory_id in known_events:
            reached.add(memory_id)
        elif ":" in memory_id and memory_id.rsplit(":", 1)[1] in known_events:
            reached.add(memory_id.rsplit(":", 1)[1])
        reached |= set(evidence.get(memory_id, ()))
    return {e for e in reached if e in known_events}


def reached_dia_ids(items: Iterable[Any], evidence: Mapping[str, Iterable[str]],
                    event_dia: Mapping[str, str]) -> set[str]:
    out: set[str] = set()
    for item in items:
        out |= {event_dia[e] for e in item_event_ids(item, evidence, event_dia)}
    return out


# Answers to these categories are said in the conversation (multi-hop,
# open-domain, single-hop); temporal answers are dates the model works out
# from the turns' days, not words a block contains.
ANSWER_CATEGORIES = (1, 3, 4)


def answer_words(answer: Any, text: str) -> float | None:
    """The share of the answer's content words (the plugin's query tokens:
    stopwords out, English words stemmed) among the words of ``text``; None
    for an answer with no content word."""
    wanted = set(query_tokens(str(answer)))
    if not wanted:
        return None
    return len(wanted & set(search_tokens(text))) / len(wanted)


def evidence_recall(gold: Iterable[str], reached: Iterable[str]) -> float:
    gold = set(gold)
    if not gold:
        raise ValueError("a question without gold evidence has no recall")
    return len(gold & set(reached)) / len(gold)


# -- aggregation ----------------------------------------------------------------


@dataclass
class QuestionResult:
    category: int
    gold: frozenset[str]
    reached: frozenset[str]
    tokens: int
    items: int = 0
    read_ms: float | None = None
    embed_ms: float = 0.0  # of read_ms, spent embedding the query
    raw_events: int = 0  # of items, raw turns injected as such
    answer_words: float | None = None  # see answer_words; None outside ANSWER_CATEGORIES
    evidence_role: str | None = None  # whose turns hold the answer ("user", "assistant"), where the data says
    bot_tokens: int = 0  # of tokens, taken by the bot's own lines
    # Reached through the block's facts and turns alone: a summary line is
    # credited with every event of its period (a span of sessions), which
    # flatters summaries; None where the block held no summary.
    reached_without_summaries: frozenset[str] | None = None

    @property
    def recall(self) -> float:
        return evidence_recall(self.gold, self.reached)

    @property
    def all_reached(self) -> bool:
        return self.gold <= self.reached


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), None when empty."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q))


# A figure's 95 % interval: the 2.5th and 97.5th percentiles of its mean over
# this many resamples of the questions with replacement (a fixed seed, so a
# rerun prints the same interval for the same results).
BOOTSTRAP_RESAMPLES = 2000


def interval(values: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> list[float] | None:
    """The 95 % bootstrap interval of the mean of ``values`` over questions
    (None for fewer than two): a 0.01 move inside it is not a gain."""
    if len(values) < 2:
        return None
    data = np.asarray(values, dtype=float)
    picks = np.random.default_rng(seed).integers(0, len(data), size=(resamples, len(data)))
    low, high = np.percentile(data[picks].mean(axis=1), [2.5, 97.5])
    return [float(low), float(high)]


def summarise(results: Sequence[QuestionResult]) -> dict[str, Any]:
    if not results:
        return {"n": 0, "evidence_recall": None, "all_evidence_rate": None, "mean_tokens": None,
                "mean_items": None, "mean_raw_events": None}
    out: dict[str, Any] = {
        "n": len(results),
        "evidence_recall": sum(r.recall for r in results) / len(results),
        "all_evidence_rate": sum(r.all_reached for r in results) / len(results),
        "mean_tokens": sum(r.tokens for r in results) / len(results),
        "max_tokens": max(r.tokens for r in results),
        "mean_items": sum(r.items for r in results) / len(results),
        "mean_raw_events": sum(r.raw_events for r in results) / len(results),
        "evidence_recall_ci": interval([r.recall for r in results]),
        "all_evidence_rate_ci": interval([float(r.all_reached) for r in results]),
    }
    if any(r.reached_without_summaries is not None for r in results):
        out["evidence_recall_without_summaries"] = sum(evidence_recall(
            r.gold, r.reached if r.reached_without_summaries is None else r.reached_without_summaries)
            for r in results) / len(results)
    answered = [r.answer_words for r in results if r.answer_words is not None]
    if answered:
        out["answer_words"] = sum(answered) / len(answered)
        out["answer_words_ci"] = interval(answered)
    times = [r.read_ms for r in results if r.read_ms is not None]
    if times:
        out["p50_read_ms"] = percentile(times, 50)
        out["p95_read_ms"] = percentile(times, 95)
    return out


def report(results: Sequence[QuestionResult], main_categories: Iterable[int] = (1, 2, 3, 4),
           separate: int = 5) -> dict[str, Any]:
    """Main figures over ``main_categories``, each of them on its own, and
    the ``separate`` category (LoCoMo's adversarial questions) on its own."""
    main_categories = list(main_categories)
    main = [r for r in results if r.category in main_categories]
    out = summarise(main)
    out["per_category"] = {
        str(c): summarise([r for r in results if r.category == c]) for c in main_categories
    }
    out[f"category_{separate}"] = summarise([r for r in results if r.category == separate])
    roles = sorted({r.evidence_role for r in main if r.evidence_role})
    if roles:
        out["by_evidence_role"] = {role: summarise([r for r in main if r.evidence_role == role]) for role in roles}
    if main and any(r.bot_tokens for r in main):
        out["mean_bot_tokens"] = sum(r.bot_tokens for r in main) / len(main)
        out["bot_token_share"] = sum(r.bot_tokens for r in main) / max(1, sum(r.tokens for r in main))
    return out


# -- rankings -----------------------------------------------------------------------


class BM25:
    """Okapi BM25 over pre-tokenised documents (k1=1.5, b=0.75, the
    non-negative idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``).

    Documents are tokenised with the plugin's ``search_tokens``; a query
    with ``query_tokens`` (the same tokens, stopwords and one-letter Latin
    tokens dropped, duplicates removed), as the plugin's keyword search does.
    """

    def __init__(self, documents: Sequence[str], k1: float = 1.5, b: float = 0.75,
                 tokenize: Callable[[str], list[str]] = search_tokens) -> None:
        self.k1, self.b = k1, b
        self._tf = [Counter(tokenize(d)) for d in documents]
        self._len = [sum(tf.values()) for tf in self._tf]
        self.n = len(documents)
        self.avgdl = (sum(self._len) / self.n) if self.n else 0.0
        df: Counter[str] = Counter()
        for tf in self._tf:
            df.update(tf.keys())
        self.idf = {t: math.log(1.0 + (self.n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        self._postings: dict[str, list[int]] = {}
        for i, tf in enumerate(self._tf):
            for t in tf:
                self._postings.setdefault(t, []).append(i)

    def scores(self, query: str | Sequence[str]) -> dict[int, float]:
        """Document index -> score, for the documents sharing a query token."""
        tokens = query_tokens(query) if isinstance(query, str) else list(dict.fromkeys(query))
        out: dict[int, float] = {}
        avgdl = self.avgdl or 1.0
        for t in tokens:
            idf = self.idf.get(t)
            if idf is None:
                continue
            for i in self._postings[t]:
                f = self._tf[i][t]
                norm = f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * self._len[i] / avgdl))
                out[i] = out.get(i, 0.0) + idf * norm
        return out

    def rank(self, query: str | Sequence[str]) -> list[int]:
        """Matching documents, best first (ties: lower index first)."""
        scores = self.scores(query)
        return sorted(scores, key=lambda i: (-scores[i], i))


def dense_rank(query_vec: np.ndarray, doc_vecs: np.ndarray) -> list[int]:
    """All documents by cosine similarity (rows are L2-normalised), best
    first; ties by index."""
    if len(doc_vecs) == 0:
        return []
    sims = doc_vecs @ np.asarray(query_vec, dtype=np.float32).reshape(-1)
    order = np.lexsort((np.arange(len(sims)), -sims))
    return [int(i) for i in order]


def rrf(rankings: Sequence[Sequence[int]], k: int = 60) -> list[int]:
    """Reciprocal-rank fusion: score(d) = sum over rankings of 1/(k + rank),
    rank counted from 1. Ties: the better best rank, then the lower index."""
    score: dict[int, float] = {}
    best: dict[int, int] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            score[doc] = score.get(doc, 0.0) + 1.0 / (k + rank)
            best[doc] = min(best.get(doc, rank), rank)
    return sorted(score, key=lambda d: (-score[d], best[d], d))


# -- the token budget ---------------------------------------------------------------


@dataclass
class Unit:
    """One retrievable line of a baseline and the dialogue turns it stands for."""

    line: str
    dia_ids: frozenset[str]
    cost: int | None = None  # tokens of "\n" + line, filled in by budget_cut


@dataclass
class Cut:
    chosen: list[int] = field(default_factory=list)
    text: str = ""
    tokens: int = 0


def budget_cut(ranking: Iterable[int], units: Sequence[Unit], count: Callable[[str], int],
               max_tokens: int, max_items: int | None = None) -> Cut:
    """Take units in ranked order, one line each between the reader's header
    and footer, and stop at the first one that would exceed ``max_tokens``
    (or after ``max_items``). The block is then measured whole, as the
    reader does, and shortened if BPE merges made it dearer than the sum."""
    used = count(HEADER + "\n" + FOOTER)
    if used > max_tokens:
        return Cut()
    chosen: list[int] = []
    for i in ranking:
        if max_items is not None and len(chosen) >= max_items:
            break
        unit = units[i]
        if unit.cost is None:
            unit.cost = count("\n" + unit.line)
        if used + unit.cost > max_tokens:
            break
        used += unit.cost
        chosen.append(i)
    while chosen:
        text = "\n".join([HEADER, *(units[i].line for i in chosen), FOOTER])
        tokens = count(text)
        if tokens <= max_tokens:
            return Cut(chosen, text, tokens)
        chosen.pop()
    return Cut()


def cut_reaches(cut: Cut, units: Sequence[Unit]) -> set[str]:
    out: set[str] = set()
    for i in cut.chosen:
        out |= units[i].dia_ids
    return out
