"""What the log says at start: vector search is called unavailable only when
it is, and the plugin's records carry the fields AstrBot's handlers format."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from astrbot_plugin_ltm.indexes.embeddings import Embeddings
from astrbot_plugin_ltm.logs import PARENT, log
from astrbot_plugin_ltm.scope import Scope

UNAVAILABLE = "vector search unavailable"
SCOPE = Scope("user", "qq:alice")


class LateProvider:
    """As AstrBot's provider looks to a plugin: none until AstrBot has
    loaded its providers (after its plugins), then a working one."""

    def __init__(self) -> None:
        self.loaded = False
        self.model_id = ""

    async def embed(self, texts: list[str]) -> np.ndarray:
        if not self.loaded:
            raise LookupError("no embedding provider is configured in AstrBot")
        self.model_id = "e5:multilingual-e5-small:4"
        return np.ones((len(texts), 4), np.float32)


class DownProvider:
    model_id = "down:m:4"

    async def embed(self, texts: list[str]) -> np.ndarray:
        raise ConnectionError("connection refused")


class StubIndex:
    async def search_corpora(self, scopes, model, vector, k, corpora, wait=None):
        return {corpus: {} for corpus in corpora}


def messages(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == log.name and r.levelno >= level]


async def test_a_provider_loading_after_the_plugin_is_never_called_unavailable(caplog):
    caplog.set_level(logging.DEBUG, logger=log.name)
    provider = LateProvider()
    embeddings = Embeddings(provider, StubIndex())
    assert await embeddings.embed(["model probe"]) is None  # the fill's probe at start: too early
    provider.loaded = True
    assert await embeddings.embed(["model probe"]) is not None
    await embeddings.query([SCOPE], "where do I live?", 5)
    said = messages(caplog)
    assert not any(UNAVAILABLE in m for m in said), said
    assert said == ["ltm: vector search on (embedding model e5:multilingual-e5-small:4)"]


async def test_no_provider_at_all_is_said_once_when_a_read_goes_without_it(caplog):
    caplog.set_level(logging.DEBUG, logger=log.name)
    embeddings = Embeddings(LateProvider(), StubIndex())
    assert await embeddings.embed(["model probe"]) is None
    assert not any(UNAVAILABLE in m for m in messages(caplog, logging.WARNING))
    for _ in range(3):
        hits = await embeddings.query([SCOPE], "where do I live?", 5)
        assert hits.memories == {} and hits.turns == {}
    warnings = messages(caplog, logging.WARNING)
    assert warnings == [
        "ltm: vector search unavailable (no embedding provider is configured in AstrBot); keyword-only"]


async def test_a_failing_provider_is_said_at_once(caplog):
    embeddings = Embeddings(DownProvider(), StubIndex())
    assert await embeddings.embed(["model probe"]) is None
    assert messages(caplog, logging.WARNING) == [
        "ltm: vector search unavailable (ConnectionError: connection refused); keyword-only"]


class _Enrich(logging.Filter):
    """What AstrBot before 4.29 puts on its ``astrbot`` logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.plugin_tag = "[Plug]"
        return True


def test_records_get_the_fields_astrbot_before_4_29_formats():
    parent = logging.getLogger(PARENT)
    enrich = _Enrich()
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))  # raises ValueError on a missing field

    handler = Collect()
    handler.setFormatter(logging.Formatter("%(plugin_tag)s %(message)s"))
    parent.addFilter(enrich)
    parent.addHandler(handler)
    try:
        log.warning("ltm: hello")
    finally:
        parent.removeHandler(handler)
        parent.removeFilter(enrich)
    assert lines == ["[Plug] ltm: hello"]


def test_a_logger_astrbot_set_up_itself_keeps_its_own_fields():
    parent = logging.getLogger(PARENT)
    enrich, own = _Enrich(), logging.Filter()
    seen: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    handler = Collect()
    parent.addFilter(enrich)
    parent.addHandler(handler)
    log.addFilter(own)  # AstrBot 4.29 gives each plugin's logger its own enricher
    try:
        log.warning("ltm: hello")
    finally:
        log.removeFilter(own)
        parent.removeHandler(handler)
        parent.removeFilter(enrich)
    assert len(seen) == 1 and not hasattr(seen[0], "plugin_tag")


def test_importing_the_logger_again_keeps_one_filter_of_ours():
    import importlib

    import astrbot_plugin_ltm.logs as logs

    importlib.reload(logs)  # what an AstrBot plugin reload does
    importlib.reload(logs)
    assert len([f for f in log.filters if getattr(f, logs.MARK, False)]) == 1
    test_records_get_the_fields_astrbot_before_4_29_formats()
