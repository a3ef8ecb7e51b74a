"""The plugin loads and works without the packages that only improve
quality (bpe-openai, snowballstemmer: a failed dependency install), says so
once, and comes back to full quality when they are installed; a keyword
index built without stems is rebuilt when the stemmer appears."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import text

from astrbot_plugin_ltm import text as tokenizing
from astrbot_plugin_ltm.enums import Corpus
from astrbot_plugin_ltm.recalling import tokens
from astrbot_plugin_ltm.recalling.tokens import EstimateCounter, TiktokenCounter
from astrbot_plugin_ltm.scope import Scope
from astrbot_plugin_ltm.storing.keyword_rows import match_stemmer
from astrbot_plugin_ltm.storing.memory_rows import fact_written
from astrbot_plugin_ltm.storing.tables import MemoryItem
from astrbot_plugin_ltm.storing.terms import decode, term_key
from astrbot_plugin_ltm.text import query_tokens

ALICE = Scope("user", "qq:alice")


def load_text_module_without_snowballstemmer(monkeypatch) -> ModuleType:
    """A fresh copy of text.py imported where ``import snowballstemmer`` fails."""
    monkeypatch.setitem(sys.modules, "snowballstemmer", None)  # None in sys.modules: ImportError
    spec = importlib.util.spec_from_file_location("astrbot_plugin_ltm.text_without_stemmer", tokenizing.__file__)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def without_stemmer(monkeypatch) -> None:
    """The plugin's own text module as it is loaded without snowballstemmer."""
    monkeypatch.setattr(tokenizing, "_STEMMER", None)
    monkeypatch.setattr(tokenizing, "KEYWORD_STEMMER", tokenizing.NO_STEMMER)
    clear_token_caches()


def clear_token_caches() -> None:
    tokenizing._english_stem.cache_clear()
    tokenizing._token_set.cache_clear()


async def add_fact(ltm, fact: str) -> MemoryItem:
    async with ltm.engine.db.write() as session:
        item = MemoryItem(scope=ALICE.kind, scope_id=ALICE.id, type="preference", fact=fact,
                          fact_key=fact, confidence=0.9, status="active")
        session.add(item)
        await session.flush()
        await fact_written(session, item, created=True)
    return item


async def found(ltm, query: str, corpus: Corpus = Corpus.MEMORIES) -> list[int]:
    return [rowid for rowid, _ in
            await ltm.engine.keyword_index.search([ALICE], corpus, query_tokens(query), 10)]


# -- snowballstemmer ------------------------------------------------------------------


def test_without_snowballstemmer_english_words_are_keywords_as_they_are_with_one_warning(monkeypatch, caplog):
    with caplog.at_level(logging.WARNING, logger="astrbot.plugin.astrbot_plugin_ltm"):
        bare = load_text_module_without_snowballstemmer(monkeypatch)
    assert bare.KEYWORD_STEMMER == bare.NO_STEMMER
    assert bare.search_tokens("She reads books about cats 猫咪") == ["she", "reads", "books", "about", "cats", "猫咪"]
    warnings = [r.getMessage() for r in caplog.records if "snowballstemmer" in r.getMessage()]
    assert len(warnings) == 1 and "not installed" in warnings[0] and "reload" in warnings[0]


def test_with_snowballstemmer_english_words_are_stemmed_and_the_stemmer_is_named_by_its_release():
    assert tokenizing.search_tokens("She reads books") == ["she", "read", "book"]
    assert tokenizing.KEYWORD_STEMMER.startswith("snowballstemmer 3.")
    assert tokenizing.KEYWORD_STEMMER.count(".") == 1  # major.minor: releases that stem alike share it


async def test_an_index_built_without_the_stemmer_is_rebuilt_with_stems_once_the_stemmer_appears(
        make_ltm, origin, monkeypatch):
    without_stemmer(monkeypatch)
    before = await make_ltm({"write_policy": {"mode": "auto"}}, name="shared.db")
    item = await add_fact(before, "Alice collects old books")
    await before.record(origin("alice"), "I was reading detective novels all night")
    assert await before.sql("SELECT built_with FROM ltm_index_builds WHERE name = 'keywords'") == [("none",)]
    assert (await before.sql("SELECT tokens FROM ltm_items_fts"))[0][0] == "alice collects old books"
    assert await found(before, "books") == [item.id]  # unstemmed on both sides: it still finds
    await before.engine.stop()

    monkeypatch.undo()  # snowballstemmer is installed; AstrBot reloads the plugin
    clear_token_caches()
    after = await make_ltm({"write_policy": {"mode": "auto"}}, name="shared.db")
    assert await after.sql("SELECT built_with FROM ltm_index_builds WHERE name = 'keywords'") == [
        (tokenizing.KEYWORD_STEMMER,)]
    assert (await after.sql("SELECT tokens FROM ltm_items_fts"))[0][0] == "alic collect old book"
    assert await found(after, "book") == [item.id]  # the stem finds the fact written as "books"
    turn = await after.sql("SELECT id FROM ltm_events WHERE source_role = 'user'")
    assert await found(after, "novel", Corpus.TURNS) == [turn[0][0]]


async def test_turn_rows_built_without_the_stemmer_are_rebuilt_with_stems_as_a_fresh_rebuild_makes_them(
        make_ltm, origin, monkeypatch):
    without_stemmer(monkeypatch)
    before = await make_ltm({"write_policy": {"mode": "auto"}}, name="shared.db")
    for n, said in enumerate(["I was reading detective novels all night", "The cats were chasing mice",
                              "我们周末去爬山 and went hiking", "Running shoes, running tracks"]):
        await before.record(origin("alice" if n % 2 else "bob"), said, "Sounds like fun, tell me more about it")
    await before.engine.stop()
    monkeypatch.undo()
    clear_token_caches()
    after = await make_ltm({"write_policy": {"mode": "auto"}}, name="shared.db")
    rebuilt = await after.sql("SELECT event_rowid, terms FROM ltm_turn_terms ORDER BY event_rowid")
    assert any(term_key("novel") in decode(terms) for _, terms in rebuilt)
    assert not any(term_key("novels") in decode(terms) for _, terms in rebuilt)
    async with after.engine.db.write() as session:
        await session.execute(text("UPDATE ltm_index_builds SET built_with = 'unknown'"))
        assert await match_stemmer(session)  # tokenises every turn again
    assert await after.sql("SELECT event_rowid, terms FROM ltm_turn_terms ORDER BY event_rowid") == rebuilt


async def test_an_index_built_with_stems_is_rebuilt_unstemmed_when_the_stemmer_is_gone(make_ltm, monkeypatch):
    stemmed = await make_ltm({"write_policy": {"mode": "auto"}}, name="shared.db")
    item = await add_fact(stemmed, "Alice collects old books")
    assert (await stemmed.sql("SELECT tokens FROM ltm_items_fts"))[0][0] == "alic collect old book"
    await stemmed.engine.stop()

    without_stemmer(monkeypatch)
    bare = await make_ltm({"write_policy": {"mode": "auto"}}, name="shared.db")
    assert (await bare.sql("SELECT tokens FROM ltm_items_fts"))[0][0] == "alice collects old books"
    assert await found(bare, "collects books") == [item.id]
    assert [n.code for n in bare.engine.notices()] == ["notice.no_embedding_provider", "notice.package_missing"]


async def test_an_index_already_built_with_the_same_stemmer_is_left_alone(make_ltm):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}}, name="shared.db")
    await add_fact(ltm, "Alice collects old books")
    built_at = await ltm.sql("SELECT built_at FROM ltm_index_builds")
    await ltm.engine.stop()
    again = await make_ltm({"write_policy": {"mode": "auto"}}, name="shared.db")
    assert await again.sql("SELECT built_at FROM ltm_index_builds") == built_at


# -- bpe-openai -----------------------------------------------------------------------


@pytest.fixture
def fresh_counter():
    tokens.default_counter.cache_clear()
    yield
    tokens.default_counter.cache_clear()


def without_bpe_openai(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "bpe_openai", None)  # None in sys.modules: ImportError
    monkeypatch.setitem(sys.modules, "bpe_openai.data", None)


def test_without_bpe_openai_token_counts_are_estimated_with_one_warning(monkeypatch, caplog, fresh_counter):
    without_bpe_openai(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="astrbot.plugin.astrbot_plugin_ltm"):
        counter = tokens.default_counter()
        tokens.default_counter()
    assert isinstance(counter, EstimateCounter)
    assert counter.count("我喜欢绿茶 and green tea") >= 8  # errs high: cl100k spends about 8 here
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "bpe-openai is not installed" in warnings[0] and "reload" in warnings[0]


def test_with_bpe_openai_token_counts_are_cl100k(fresh_counter):
    assert isinstance(tokens.default_counter(), TiktokenCounter)


def test_the_counter_reads_bpe_openais_file_without_importing_the_package():
    """Importing bpe_openai decodes all three of its vocabularies into dicts
    it keeps: ~56 MB more resident for an engine that counts with one."""
    script = ("import sys; from astrbot_plugin_ltm.recalling import tokens; "
              "counter = tokens.default_counter(); "
              "print(type(counter).__name__, counter.count('green tea'), 'bpe_openai' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.stdout.split() == ["TiktokenCounter", "2", "False"]


async def test_an_engine_counting_by_estimate_says_bpe_openai_is_missing(make_ltm, monkeypatch, fresh_counter):
    without_bpe_openai(monkeypatch)
    ltm = await make_ltm(embedder=None)
    missing = [n for n in ltm.engine.notices() if n.code == "notice.package_missing"]
    assert [n.params["package"] for n in missing] == ["bpe-openai"]
    assert "estimated" in str(missing[0]) and "估算" in missing[0].render("zh")
