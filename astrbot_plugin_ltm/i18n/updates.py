"""Texts of the write path's handling of changed facts: code → (English, Chinese)."""

TEXTS: dict[str, tuple[str, str]] = {
    "updates.unsure": (
        "{reason}; flagged for review: the same key in other words, so the newer statement is shown — "
        "check that the value changed",
        "{reason}；已标记待审核：同一键值但措辞不同（如换了语言），先显示较新的说法——请确认取值确实变了",
    ),
}
