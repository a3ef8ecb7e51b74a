"""The one error operating raises for a request it cannot carry out."""

from __future__ import annotations


class AdminError(ValueError):
    """A request that cannot be carried out; the message says why, and
    ``status`` is the HTTP status the API answers with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status
