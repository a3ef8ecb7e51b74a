"""Texts shared by several areas: code → (English, Chinese)."""

TEXTS: dict[str, tuple[str, str]] = {
    "common.not_running": ("Long-term memory is not running; see the AstrBot log.",
                           "长期记忆未在运行，请查看 AstrBot 日志。"),
    "common.failed": ("Sorry, that failed: {error}", "抱歉，操作失败：{error}"),
}
