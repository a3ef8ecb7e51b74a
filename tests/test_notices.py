"""engine.notices() and providers(): what limits memory right now, as the
adapter sees AstrBot's providers, in both languages; GET stats lists them."""

from __future__ import annotations

import numpy as np

from astrbot_plugin_ltm.adapter import AstrBotEmbedder, AstrBotModels
from astrbot_plugin_ltm.i18n import say


class AstrBotContext:
    """What the adapter asks of AstrBot's Context about providers."""

    def __init__(self, chat: list[object], embedding: list[object]) -> None:
        self.chat, self.embedding = chat, embedding

    def get_all_providers(self) -> list[object]:
        return self.chat

    def get_all_embedding_providers(self) -> list[object]:
        return self.embedding

    def get_provider_by_id(self, provider_id: str) -> object | None:
        return None


class EmbeddingProvider:
    async def get_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]


class GatewayWithoutProvider:
    """A ModelGateway that can tell AstrBot has no chat provider."""

    def provider_exists(self) -> bool:
        return False

    async def completer(self, provider_id: str, session_id: str | None) -> None:
        return None


class Embedder:
    model_id = "test:2"

    def __init__(self) -> None:
        self.exists = True

    def provider_exists(self) -> bool:
        return self.exists

    async def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 2), dtype=np.float32)


def test_the_adapter_tells_whether_astrbot_has_a_chat_and_an_embedding_provider():
    bare = AstrBotContext(chat=[], embedding=[])
    assert not AstrBotModels(bare).provider_exists()
    assert not AstrBotEmbedder(bare, "").provider_exists()
    full = AstrBotContext(chat=[object()], embedding=[EmbeddingProvider()])
    assert AstrBotModels(full).provider_exists()
    assert AstrBotEmbedder(full, "").provider_exists()


async def test_without_a_chat_provider_memory_says_it_learns_nothing(make_ltm):
    ltm = await make_ltm(gateway_=GatewayWithoutProvider(), embedder=Embedder())
    assert ltm.engine.providers() == {"chat": False, "embedding": True}
    assert [n.code for n in ltm.engine.notices()] == ["notice.no_chat_provider"]
    notice = ltm.engine.notices()[0]
    assert "learns nothing" in str(notice) and "不会从对话中学习" in notice.render("zh")


async def test_without_an_embedding_provider_memory_says_search_is_keyword_only(make_ltm):
    embedder = Embedder()
    ltm = await make_ltm(embedder=embedder)
    assert ltm.engine.notices() == []
    embedder.exists = False  # the operator removed it in AstrBot: asked each time
    assert ltm.engine.providers() == {"chat": True, "embedding": False}
    assert [n.code for n in ltm.engine.notices()] == ["notice.no_embedding_provider"]
    assert "keyword-only" in str(ltm.engine.notices()[0])


async def test_an_engine_given_no_embedder_at_all_searches_by_keyword_only(make_ltm):
    ltm = await make_ltm()
    assert ltm.engine.providers()["embedding"] is False
    assert "notice.no_embedding_provider" in [n.code for n in ltm.engine.notices()]


async def test_stats_lists_the_notices_and_providers_in_the_pages_language(make_api):
    api = await make_api(gateway_=GatewayWithoutProvider())
    english = await api.ok("stats", {})
    assert english["providers"] == {"chat": False, "embedding": False}
    assert english["notices"] == [
        {"code": "notice.no_chat_provider", "message": say("notice.no_chat_provider", "en")},
        {"code": "notice.no_embedding_provider", "message": say("notice.no_embedding_provider", "en")},
    ]
    chinese = await api.ok("stats", {"lang": "zh"})
    assert [n["message"] for n in chinese["notices"]] == [
        say("notice.no_chat_provider", "zh"), say("notice.no_embedding_provider", "zh")]
