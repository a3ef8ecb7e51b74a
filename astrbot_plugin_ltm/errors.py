"""The one error the core raises for a request it cannot carry out; beside
config.py, which reads it too, so the lowest layer imports nothing above it."""

from __future__ import annotations

from .i18n import Lang, Message, render


class AdminError(ValueError):
    """A request that cannot be carried out, with the HTTP status the API answers; a
    Message is shown in the reader's language, its code the machine-readable reason."""

    def __init__(self, message: str | Message, status: int = 400) -> None:
        super().__init__(str(message))
        self.text = message
        self.status = status

    @property
    def code(self) -> str | None:
        return self.text.code if isinstance(self.text, Message) else None

    def message(self, lang: Lang = "en") -> str:
        return render(self.text, lang)
