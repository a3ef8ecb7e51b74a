"""Texts of "operators see what the bot sees": the injection preview, the
search of memories and what an import does: code → (English, Chinese)."""

TEXTS: dict[str, tuple[str, str]] = {
    # -- the injection preview: bad requests -----------------------------------
    "preview.send": ('Send {"scope": "user:<id>", "message": "…"} (optionally "group" and "persona").',
                     '请发送 {"scope": "user:<id>", "message": "…"}（可选 "group" 与 "persona"）。'),
    "preview.unknown_fields": ("Unknown field(s): {fields}.", "未知字段：{fields}。"),
    "preview.bad_scope": ("scope must name a user with their platform, e.g. qq:123 as the memory list shows it "
                          "or user:qq:123 (got {scope}).",
                          "scope 须为带平台的用户，例如记忆列表中显示的 qq:123，或 user:qq:123（收到 {scope}）。"),
    "preview.user_only": ("Preview as a user (user:<id>); give a group chat as \"group\".",
                          "请以用户（user:<id>）预览；群聊请填在 \"group\" 中。"),
    "preview.not_read": ("{scope} is not what the bot reads for that user here; pick the user as the memory "
                         "list shows them.",
                         "机器人在此不会为该用户读取 {scope}；请按记忆列表中的显示选择用户。"),
    "preview.empty_message": ("message must not be empty.", "message 不能为空。"),
    "preview.long_message": ("message is too long ({chars} characters; at most {max_chars}).",
                             "message 过长（{chars} 个字符；最多 {max_chars} 个）。"),
    "preview.not_started": ("Long-term memory has not started yet; try again in a moment.",
                            "长期记忆尚未启动，请稍后再试。"),
    # -- the injection preview: why nothing is read ---------------------------------
    "preview.reading_off": ("Memory reading is switched off (enable or read_policy.enable): the bot is given "
                            "no block.",
                            "记忆读取已关闭（“启用长期记忆”或“注入记忆”为关）：机器人不会收到记忆块。"),
    # -- the injection preview: why a line was cut ----------------------------------
    "preview.cut.budget": ("It did not fit in the token budget (read_policy.max_tokens).",
                           "超出了 token 预算（最多注入 token 数）。"),
    "preview.cut.max_items": ("The block already had read_policy.max_items memories.",
                              "记忆块已达到最多注入条数。"),
    "preview.cut.max_events": ("The block already had read_policy.max_events turns.",
                               "记忆块已达到最多注入的原始对话条数。"),
    "preview.cut.per_type": ("The block already had read_policy.max_per_type memories of this type.",
                             "这一类型的记忆已达到每种类型最多条数。"),
    "preview.cut.duplicate": ("It nearly repeats a memory already in the block.",
                              "与记忆块中已有的记忆几乎重复。"),
    "preview.cut.covered": ("A memory in the block was learnt from this turn and says it already.",
                            "记忆块中已有由这条对话得出的记忆。"),
    "preview.cut.bot_share": ("The bot's own replies already took their share of the budget.",
                              "机器人自己的回复已用完其预算份额。"),
    "preview.cut.full": ("The block was full before this line was reached.",
                         "在轮到这一行之前记忆块已满。"),
    "preview.cut.withheld": ("Withheld: a memory it backed was deleted or rejected, or its scope was forgotten.",
                             "已扣留：它支撑的记忆被删除或驳回，或其范围已被遗忘。"),
    "preview.cut.unreviewed": ("No reviewed memory backs this turn (turns are quoted alone only in mode auto).",
                               "没有已审核的记忆支撑这条对话（仅在 auto 模式下才单独引用对话）。"),
    "preview.cut.not_active": ("The memory is {status}, not active.", "该记忆{status}，未生效。"),
    "preview.cut.awaiting_approval": ("The memory awaits approval.", "该记忆正在等待审核。"),
    "preview.cut.low_confidence": ("Its confidence is below read_policy.min_confidence.",
                                   "其置信度低于注入的最低置信度。"),
    "preview.cut.expired": ("It is past its retention (ttl_days).", "已超过保留期限。"),
    # -- search --------------------------------------------------------------
    "search.no_words": ("The search text has no searchable words.", "搜索文本中没有可搜索的词。"),
    "search.no_embeddings": ("Searching by meaning needs an embedding provider; none is configured "
                             "(search by words instead).",
                             "按语义搜索需要嵌入（embedding）服务商，当前未配置（请改用关键词搜索）。"),
    "search.embedding_failed": ("The embedding provider did not answer; try again, or search by words.",
                                "嵌入服务商没有响应；请重试，或改用关键词搜索。"),
    # -- import: the status imported memories get ----------------------------------
    "import.bad_status": ("status must be \"as_exported\" or \"shadow\" (import for review).",
                          "status 须为 \"as_exported\"（保持导出时的状态）或 \"shadow\"（导入待审核）。"),
    "import.as_exported": ("Imported memories keep the status they were exported with (active ones are used "
                           "at once).",
                           "导入的记忆保持导出时的状态（已生效的记忆会立即被使用）。"),
    "import.for_review": ("Imported memories are stored as shadow, awaiting approval: none is used until an "
                          "operator approves it.",
                          "导入的记忆将先保存为待审核：在管理员批准前不会被使用。"),
    "import.active_past_review": ("This bot is in mode {mode}, but {count} imported memories would be active at "
                                  "once, unreviewed; import for review (status shadow) to review them first.",
                                  "此机器人的写入模式为“{mode}”，但有 {count} 条导入的记忆会立即生效且未经审核；"
                                  "如需先审核，请选择“导入待审核”。"),
    "audit.imported_for_review": ("imported for review", "导入，待审核"),
}
