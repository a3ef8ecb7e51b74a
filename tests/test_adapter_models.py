"""AstrBotModels: extraction finds no provider without an error while
AstrBot has not loaded its providers yet (the worker starts before them, and
after a crash there are pending events at once)."""

from __future__ import annotations

from astrbot_plugin_ltm.adapter import AstrBotModels


class ProviderNotFoundError(Exception):
    pass


class Provider:
    class Meta:
        id = "chat"

    def meta(self):
        return self.Meta()

    def get_model(self):
        return "model-x"


class Context:
    def __init__(self, providers):
        self.providers = providers

    async def get_current_chat_provider_id(self, umo):
        if not self.providers:
            raise ProviderNotFoundError("Provider not found")  # what AstrBot 4.29 raises
        return "chat"

    def get_provider_by_id(self, provider_id):
        return next((p for p in self.providers if p.meta().id == provider_id), None)

    def get_all_providers(self):
        return self.providers


async def test_no_provider_loaded_yet_means_no_extractor_not_an_error():
    assert await AstrBotModels(Context([])).completer("", "webchat:FriendMessage:u1") is None


async def test_the_session_provider_is_used_once_loaded():
    found = await AstrBotModels(Context([Provider()])).completer("", "webchat:FriendMessage:u1")
    assert found is not None and found[1] == "chat:model-x"
