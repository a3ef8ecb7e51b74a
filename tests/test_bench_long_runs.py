"""bench.locomo on long data: conversations in worker processes (--jobs),
the on-disk embedding cache (bench/embed_cache.py), progress lines, and the
summary stand-in's extractive summaries for data without recorded ones.
The figures must not depend on how the run was made: a tiny dataset is run
serially, in two worker processes, and through the cache, and every figure
but the timings must be the same. No model is loaded (HashEmbedder)."""

from __future__ import annotations

import asyncio
import copy
import re
import threading
import time
from datetime import UTC, datetime
from functools import partial
from types import SimpleNamespace
from typing import Any

import numpy as np

from astrbot_plugin_ltm.enums import Role
from astrbot_plugin_ltm.recalling.tokens import EstimateCounter
from bench import locomo
from bench.embed_cache import CachedEmbedder, EmbeddingStore, cached
from bench.embedders import HashEmbedder, OneCallAtATime
from bench.summary_standin import DatasetSummaries, extractive_summary, first_sentence
from tests.helpers import TINY_LOCOMO

TIMING = re.compile(r"(_ms|seconds|_ms_excl_embedding)$|^seconds$|^total$")


def dataset() -> list[dict[str, Any]]:
    """Three small conversations, told apart by their ids and a few words."""
    out = []
    for n, pet in enumerate(("Miso", "Tofu", "Pepper"), 1):
        sample = copy.deepcopy(TINY_LOCOMO)
        sample["sample_id"] = f"tiny-{n}"
        for turn in sample["conversation"]["session_1"] + sample["conversation"]["session_2"]:
            turn["text"] = turn["text"].replace("Miso", pet)
        out.append(sample)
    return out


def figures(doc: Any) -> Any:
    """The document without anything that measures time."""
    if isinstance(doc, dict):
        return {k: figures(v) for k, v in doc.items() if not TIMING.search(k)}
    if isinstance(doc, list):
        return [figures(v) for v in doc]
    return doc


def run(tmp_path, **kwargs: Any) -> dict[str, Any]:
    convs = locomo.load_conversations(dataset())
    return asyncio.run(locomo.run(convs, counter=EstimateCounter(), **kwargs))


def test_worker_processes_give_exactly_the_figures_of_a_serial_run(tmp_path):
    lines: list[str] = []
    serial = run(tmp_path, embedder_factory=HashEmbedder)
    parallel = run(tmp_path, embedder_factory=HashEmbedder, jobs=2, progress=lines.append)
    assert serial["questions"]["scored"] == 12 and serial["baselines"]["dense_turns"]["evidence_recall"] > 0
    assert figures(parallel) == figures(serial)
    assert [c["sample_id"] for c in parallel["per_conversation"]] == ["tiny-1", "tiny-2", "tiny-3"]
    # one progress line per conversation, as each ends
    assert len(lines) == 3 and all(re.match(r"\[\d/3\] tiny-\d: 2 sessions, 6 turns, 6 events", x) for x in lines)


def test_keyword_only_runs_in_worker_processes_too(tmp_path):
    assert figures(run(tmp_path, jobs=3)) == figures(run(tmp_path))


def test_cached_embeddings_give_the_same_figures_and_a_second_run_embeds_nothing(tmp_path):
    plain = run(tmp_path, embedder=HashEmbedder())
    path = tmp_path / "cache.sqlite"
    first = CachedEmbedder(HashEmbedder(), EmbeddingStore(path))
    second = CachedEmbedder(HashEmbedder(), EmbeddingStore(path))
    assert figures(run(tmp_path, embedder=first)) == figures(plain)
    assert figures(run(tmp_path, embedder=second)) == figures(plain)
    assert first.misses > 0
    assert second.misses == 0 and second.hits > 0
    assert second.inner.texts == 0  # the model was never called


def test_worker_processes_share_the_cache(tmp_path):
    path = tmp_path / "cache.sqlite"
    plain = run(tmp_path, embedder=HashEmbedder())
    assert figures(run(tmp_path, embedder_factory=partial(cached, HashEmbedder, path), jobs=2)) == figures(plain)
    store = EmbeddingStore(path)
    texts = [t.search_text for c in locomo.load_conversations(dataset()) for t in c.turns]
    again = CachedEmbedder(HashEmbedder(), store)
    asyncio.run(again.embed(texts))
    assert again.misses == 0


def test_workers_making_a_new_cache_at_once_all_open_it(tmp_path):
    # --jobs workers each open the cache as they start; on a new file SQLite
    # answers one of two "database is locked" at once (CI lost a run to it).
    failed: list[BaseException] = []
    for n in range(150):
        path = tmp_path / f"{n}.sqlite"
        barrier = threading.Barrier(8)

        def open_it(path=path, barrier=barrier) -> None:
            barrier.wait()
            try:
                EmbeddingStore(path).close()
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                failed.append(exc)

        threads = [threading.Thread(target=open_it) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failed == []


def test_the_cache_serves_the_vectors_the_model_gave_in_the_order_asked(tmp_path):
    model = HashEmbedder()
    embedder = CachedEmbedder(model, EmbeddingStore(tmp_path / "c.sqlite"))
    texts = ["a cat named Miso", "the city marathon", "a cat named Miso", "新的工作在上海"]
    got = asyncio.run(embedder.embed(texts))
    assert np.array_equal(got, model.embed_sync(texts))
    assert model.texts == 3  # the repeated text embedded once
    again = embedder.embed_sync(list(reversed(texts)))
    assert np.array_equal(again, model.embed_sync(list(reversed(texts))))
    assert embedder.misses == 3 and embedder.hits == 5
    # another model never gets these vectors
    other = CachedEmbedder(HashEmbedder(model_id="hash-other"), EmbeddingStore(tmp_path / "c.sqlite"))
    other.embed_sync(texts[:1])
    assert other.misses == 1


def test_a_run_keeps_one_database_per_conversation_where_asked(tmp_path):
    run(tmp_path, db_path=tmp_path / "kept.db")
    assert sorted(p.name for p in tmp_path.glob("kept.*.db")) == ["kept.tiny-1.db", "kept.tiny-2.db", "kept.tiny-3.db"]


# -- the summary stand-in without recorded summaries -----------------------------------------


def event(role: str, text: str, name: str = "user") -> Any:
    return SimpleNamespace(source_role=role, content={"text": text}, sender_name=name,
                           created_at=datetime(2023, 5, 8, tzinfo=UTC), session_id="s:x")


def test_an_extractive_summary_leads_with_the_persons_sentences_then_the_bots():
    events = [
        event(Role.USER, "Hi! I just moved to Hangzhou for a new job at a tea company. It's great."),
        event(Role.ASSISTANT, "Congratulations on the move! Hangzhou has many lovely places.", "bot"),
        event(Role.USER, "Can you recommend a restaurant near West Lake?"),
        event(Role.ASSISTANT, "Sure. Louwailou is famous for its West Lake vinegar fish.", "bot"),
    ]
    assert extractive_summary(events, 1200) == (
        "user: I just moved to Hangzhou for a new job at a tea company. "
        "user: Can you recommend a restaurant near West Lake? "
        "The assistant: Congratulations on the move! "
        "The assistant: Louwailou is famous for its West Lake vinegar fish.")
    assert len(extractive_summary(events, 40)) == 40
    assert first_sentence("好的。我下个月要去杭州出差，想吃西湖醋鱼。") == "我下个月要去杭州出差，想吃西湖醋鱼。"


def test_data_without_recorded_summaries_is_summarised_extractively_and_labelled(tmp_path):
    path = tmp_path / "no_summaries.json"
    import json

    path.write_text(json.dumps(dataset()), encoding="utf-8")
    standin = DatasetSummaries(path)
    assert standin.extractive
    events = [event(Role.USER, "I adopted a kitten named Miso last week.")]
    events[0].session_id = "locomo:FriendMessage:tiny-2"
    assert asyncio.run(standin.session(events)) == "user: I adopted a kitten named Miso last week."
    convs = locomo.load_conversations(dataset())[:1]
    cost = standin.cost(convs, {"session": 2, "rollup": 0, "extractive": 2})
    # two sessions: two extraction calls and two summaries over six turns
    assert cost["calls_per_turn"] == 4 / 6 and cost["summaries"].startswith("extractive stand-in")


def test_summary_calls_made_in_worker_processes_are_counted_as_in_a_serial_run(tmp_path, monkeypatch):
    import json

    from bench import summary_standin

    path = tmp_path / "data.json"
    path.write_text(json.dumps(dataset()), encoding="utf-8")
    overrides = ["summaries.enable=true", "summaries.min_events=1"]  # one summary per (short) session
    monkeypatch.setattr(summary_standin, "INSTALLED", DatasetSummaries(path))
    serial = run(tmp_path, overrides=overrides)
    monkeypatch.setattr(summary_standin, "INSTALLED", None)
    parallel = run(tmp_path, overrides=overrides, jobs=2, summaries_data=str(path))
    # one session summary per session of the three conversations, all extractive
    assert serial["summary_calls"]["session"] == 6 and serial["summary_calls"]["extractive"] == 6
    assert figures(parallel) == figures(serial)


class SlowModel(OneCallAtATime):
    """A model that takes a while and counts the threads inside it at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.inside = 0
        self.most_inside = 0

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        self.inside += 1
        self.most_inside = max(self.most_inside, self.inside)
        time.sleep(0.02)
        self.inside -= 1
        return np.ones((len(texts), 4), dtype=np.float32)


def test_an_embedder_serves_one_call_at_a_time_in_every_conversations_event_loop():
    # A worker process reads each conversation in an event loop of its own:
    # an asyncio lock bound to the first made every later wait fail.
    model = SlowModel()

    async def three_at_once() -> None:
        await asyncio.gather(*(model.embed([f"text {n}"]) for n in range(3)))

    asyncio.run(three_at_once())
    asyncio.run(three_at_once())
    assert model.most_inside == 1


class QueriesFail(HashEmbedder):
    """Embeds the passages and the baselines' batch, fails every question."""

    async def embed(self, texts: list[str]) -> np.ndarray:
        if len(texts) == 1:
            raise RuntimeError("the model is gone")
        return await super().embed(texts)


def test_a_conversation_read_without_its_vectors_is_named_in_the_figures(tmp_path):
    doc = run(tmp_path, embedder=QueriesFail())
    assert sorted(doc["vector_failures"]) == ["tiny-1", "tiny-2", "tiny-3"]
    assert "the model is gone" in doc["vector_failures"]["tiny-1"][0]
    assert locomo.table(doc).startswith("WARNING: vector search failed in tiny-1, tiny-2, tiny-3")
    assert run(tmp_path, embedder=HashEmbedder())["vector_failures"] == {}
