"""The request's history in the replays (``bench.locomo --history N``).

AstrBot sends each message with the conversation's earlier turns; the plugin
leaves out of the block the turns that history already holds
(astrbot_plugin_ltm/recalling/history.py). Here every question is read twice:
without a history (before) and with the last N exchanges of its
conversation as the request's history (after), as AstrBot's default
(``agent_runner.config.compression.max_turns = -1``: every turn, until the
model's window is nearly full) or a ``max_turns`` of N would send them.

Figures per question: the block's tokens before and after, the tokens and
lines of the before-block that repeat the history, and evidence recall of
the block alone and of the request (block and history together: what the
model reads).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from astrbot_plugin_ltm.recalling.history import History

from .conversations import exchanges, load_conversations
from .metrics import QuestionResult, percentile, report

# AstrBot's default max_turns: no limit by turns.
ALL_TURNS = -1


@dataclass(frozen=True)
class RequestHistory:
    texts: list[str]  # the messages, oldest first
    dia_ids: frozenset[str]  # the dialogue turns they are


def request_history(exchanges: Sequence[tuple[Any, Any]], turns: int) -> RequestHistory:
    """The last ``turns`` exchanges (a person's message and the bot's reply;
    ``ALL_TURNS``: all) as the texts AstrBot would send."""
    kept = list(exchanges) if turns == ALL_TURNS else list(exchanges)[-turns:] if turns > 0 else []
    texts: list[str] = []
    ids: set[str] = set()
    for exchange in kept:
        for turn in exchange:
            if turn is not None:
                texts.append(turn.text)
                ids.add(turn.dia_id)
    return RequestHistory(texts, frozenset(ids))


@dataclass
class HistoryResult:
    """One question read before (no history) and after (with it)."""

    before: QuestionResult  # the block alone
    after: QuestionResult
    held: frozenset[str]  # the dialogue ids the history holds
    repeated_tokens: int  # of before.tokens: lines of turns the history holds
    repeated_lines: int
    messages: int  # in the history
    history_ms: float  # building the History (normalising its texts)

    def in_request(self, block: QuestionResult) -> QuestionResult:
        """What the model reads: the block and the history."""
        return QuestionResult(block.category, block.gold, block.reached | (block.gold & self.held), block.tokens,
                              block.items, block.read_ms, evidence_role=block.evidence_role)


def timed_history(texts: list[str]) -> tuple[History | None, float]:
    start = time.perf_counter()
    history = History.of(texts)
    return history, (time.perf_counter() - start) * 1000.0


def history_report(results: list[HistoryResult], turns: int) -> dict[str, Any]:
    main = [r for r in results if r.before.category in (1, 2, 3, 4)]
    n = max(1, len(main))
    before_ms = [r.before.read_ms for r in main if r.before.read_ms is not None]
    after_ms = [r.after.read_ms for r in main if r.after.read_ms is not None]
    return {
        "turns": turns,
        "questions": len(main),
        "mean_messages": sum(r.messages for r in main) / n,
        "block_before": report([r.before for r in results]),
        "block_after": report([r.after for r in results]),
        "request_before": report([r.in_request(r.before) for r in results]),
        "request_after": report([r.in_request(r.after) for r in results]),
        "mean_tokens_saved": sum(r.before.tokens - r.after.tokens for r in main) / n,
        "mean_repeated_tokens_before": sum(r.repeated_tokens for r in main) / n,
        "mean_repeated_lines_before": sum(r.repeated_lines for r in main) / n,
        "p50_read_ms_before": percentile(before_ms, 50),
        "p50_read_ms_after": percentile(after_ms, 50),
        "p50_history_ms": percentile([r.history_ms for r in main], 50),
        "p95_history_ms": percentile([r.history_ms for r in main], 95),
    }


def _f(value: Any, fmt: str = ".3f") -> str:
    return "—" if value is None else format(value, fmt)


def history_table(h: dict[str, Any]) -> str:
    turns = "all turns (AstrBot's default max_turns -1)" if h["turns"] == ALL_TURNS else f"the last {h['turns']} turns"
    lines = [
        "",
        f"request history: {turns}, {h['mean_messages']:.0f} messages a question on average "
        f"({h['questions']} questions, categories 1–4)",
        f"{'':<34}{'tokens':>8}{'block recall':>14}{'request recall':>16}{'all-ev (request)':>18}",
    ]
    for name, block, request in (("before (turns the history holds)", "block_before", "request_before"),
                                 ("after (those left out)", "block_after", "request_after")):
        b, r = h[block], h[request]
        lines.append(f"{name:<34}{_f(b['mean_tokens'], '.0f'):>8}{_f(b['evidence_recall']):>14}"
                     f"{_f(r['evidence_recall']):>16}{_f(r['all_evidence_rate']):>18}")
    lines += [
        f"  before, the block repeated {h['mean_repeated_lines_before']:.1f} lines of the history, "
        f"{h['mean_repeated_tokens_before']:.0f} tokens a question; after, "
        f"{round(h['mean_tokens_saved']):d} fewer tokens a question (the room freed goes to other lines)",
        f"  read p50 {_f(h['p50_read_ms_before'], '.1f')} ms before, {_f(h['p50_read_ms_after'], '.1f')} ms after; "
        f"building the History p50 {_f(h['p50_history_ms'], '.2f')} ms, p95 {_f(h['p95_history_ms'], '.2f')} ms",
    ]
    return "\n".join(lines)


def cost(data: str, repeats: int = 20) -> list[str]:
    """What leaving the history out costs a read, per conversation of
    ``data``: building the History of the whole conversation (AstrBot's
    default) and checking 60 turns against it (a read's candidates), the
    best of ``repeats`` (a loaded machine only adds to it)."""
    lines = []
    for conv in load_conversations(data):
        held = request_history([x for s in conv.sessions for x in exchanges(conv, s)], ALL_TURNS)
        turns = [{"text": t.text} for t in conv.turns[:: max(1, len(conv.turns) // 60)]][:60]
        built, checked = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            history = History.of(held.texts)
            built.append(time.perf_counter() - start)
            assert history is not None
            start = time.perf_counter()
            for turn in turns:
                history.holds_turn(turn)
            checked.append(time.perf_counter() - start)
        chars = sum(len(t) for t in held.texts)
        lines.append(f"{conv.sample_id}: {len(held.texts)} messages, {chars} characters: History built in "
                     f"{min(built) * 1000:.2f} ms, {len(turns)} turns checked in {min(checked) * 1000:.3f} ms")
    return lines


if __name__ == "__main__":
    import sys

    print("\n".join(cost(sys.argv[1])))
