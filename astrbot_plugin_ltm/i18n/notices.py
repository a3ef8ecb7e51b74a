"""What limits memory right now (engine.notices): code → (English, Chinese)."""

TEXTS: dict[str, tuple[str, str]] = {
    "notice.no_chat_provider": (
        "No chat provider in AstrBot: memory learns nothing from conversations until one is added.",
        "AstrBot 中没有聊天模型提供商：在添加之前，记忆不会从对话中学习任何内容。"),
    "notice.no_embedding_provider": (
        "No embedding provider in AstrBot: search is keyword-only (add one to search by meaning).",
        "AstrBot 中没有嵌入（Embedding）模型提供商：只能按关键词搜索（添加一个即可按语义搜索）。"),
    "notice.package_missing": (
        "The Python package {package} is not installed: {effect} Install requirements.txt and reload "
        "the plugin (README, Install).",
        "未安装 Python 包 {package}：{effect}请安装 requirements.txt 后重载插件（见 README 安装一节）。"),
    "notice.effect.no_stems": (
        "English keywords are not stemmed (\"books\" does not find \"book\").",
        "英文关键词不做词干化（搜“books”找不到“book”）。"),
    "notice.effect.estimated_tokens": (
        "Token counts are estimated, so memory blocks come out a little shorter.",
        "token 数只能估算，注入的记忆块会略短。"),
}
