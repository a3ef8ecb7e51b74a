"""bench.hook --parts in small: each step of the hook is timed, the steps
come in the order the hook takes them, and the journal way is run with the
garbage collector on and off. No timing is asserted (benchmarks print them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import hook


def test_parts_times_every_step_of_the_hook_and_the_journal_way_with_and_without_the_gc(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "hook.json"
    assert hook.main(["--parts", "--turns", "30", "--part-calls", "20", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    steps = list(result["parts_us"])
    assert steps[0] == "the whole hook (record_turn)"
    assert {"2 events built (clock, id, pause checks)", "2 journal lines encoded",
            "one write() of both lines"} <= set(steps)
    assert all(us > 0 for us in result["parts_us"].values())
    assert [(r["way"], r["gc"], r["turns"]) for r in result["results"]] == [("journal", True, 30),
                                                                             ("journal", False, 30)]
    printed = capsys.readouterr().out
    assert "step of one turn" in printed and "2 journal lines encoded" in printed


def test_the_ways_are_unchanged_by_the_parts_option(tmp_path: Path) -> None:
    out = tmp_path / "hook.json"
    assert hook.main(["--turns", "20", "--ways", "queue,journal", "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    assert [(r["way"], r["contended"], r["gc"]) for r in results] == [
        ("queue", False, True), ("journal", False, True), ("queue", True, True), ("journal", True, True)]
    assert all(r["p50_us"] <= r["p95_us"] <= r["max_us"] for r in results)
