"""bench.soak in small: 2,000 turns of many users and groups through an
engine with every background loop, a restart half-way, summaries on. The
run drains every queue at the end (else it exits 1), and its result has a
window per 500 turns with the figures the full soak plots. No timing is
asserted (benchmarks print them)."""

from __future__ import annotations

import asyncio
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from bench import soak

QUEUES = {"recorder_queue", "pending_events", "failed_events", "items_without_vector", "turns_without_vector",
          "turns_unsummarised", "usage_pending"}


def test_a_short_soak_drains_every_queue_and_reports_each_window(tmp_path: Path) -> None:
    out, plot = tmp_path / "soak.json", tmp_path / "soak.svg"
    status = soak.main(["--turns", "2000", "--window", "500", "--restart-every", "1000", "--users", "60",
                        "--groups", "6", "--conversations", "8", "--read-every", "25", "--tick-turns", "500",
                        "--dir", str(tmp_path / "data"), "--json", str(out), "--svg", str(plot)])
    result = json.loads(out.read_text())
    assert status == 0
    assert result["drained"] is True
    left = result["final"]["queues_left"]
    assert set(left) >= QUEUES and not any(left.values())
    assert result["final"]["journal_kb_after_stop"] == 0  # every journaled turn reached SQLite

    assert [w["turns"] for w in result["windows"]] == [500, 1000, 1500, 2000]
    assert [r["after_turns"] for r in result["restarts"]] == [1000]
    for window in result["windows"]:
        assert window["namespaces_loaded"] >= 0 and window["namespaces_mb"] >= 0
        assert window["rss_mb"] > 0 and window["hook_p50_us"] is not None and window["hook_p99_us"] is not None
        assert window["rss_p50_mb"] > 0 and window["rss_max_mb"] >= window["rss_p50_mb"]  # sampled each second
        memory = window["memory"]  # where the RSS goes: the split is there, with the text caches by name
        assert memory["python_blocks"] > 0 and memory["text_caches_mb"] > 0
        assert "recalling.excerpts.sentences" in memory["text_caches"]
        assert window["reads"] == 500 // 25 and window["read_p95_ms"] is not None
        assert set(window["queues"]) >= QUEUES
        assert {"sqlite_mb", "faiss_mb", "journal_kb"} <= set(window["sizes"])
    last = result["windows"][-1]
    assert last["rows"]["ltm_events"] >= 2 * 2000 * 0.9  # a turn is two events (some withheld are still rows)
    assert last["rows"]["ltm_items_summary"] > 0  # summaries on: sessions were summarised
    assert last["rows"]["ltm_items_active"] > 0

    svg = ET.fromstring(plot.read_text())
    # RSS, malloc, namespaces, text caches, 3 hook, 2 read, 3 sizes, bytes a recorded event
    assert len(svg.findall("{http://www.w3.org/2000/svg}polyline")) == 13

    # the kept store read again: new conversations, each read as it starts and once more
    reads = asyncio.run(soak.time_reads(tmp_path / "data", soak.parser().parse_args(
        ["--reads", "10", "--users", "60", "--groups", "6"]), 10))
    assert reads["reads"] == 10 and reads["again_p95_ms"] is not None and reads["first_p95_ms"] is not None
