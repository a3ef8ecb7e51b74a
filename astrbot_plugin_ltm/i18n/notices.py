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
    "notice.disk_fills": (
        "The disk holding the database has {free} free and memory grows about {growth} a day: at this rate it is "
        "full in {days} days. Set retention_days.turns or compact old turns (review page, statistics), or free "
        "disk space.",
        "数据库所在磁盘剩余 {free}，记忆每天约增长 {growth}：照此速度 {days} 天后磁盘将写满。请设置 "
        "retention_days.turns 或压缩旧对话（管理页面“统计”），或释放磁盘空间。"),
    "notice.effect.estimated_tokens": (
        "Token counts are estimated, so memory blocks come out a little shorter.",
        "token 数只能估算，注入的记忆块会略短。"),
}
