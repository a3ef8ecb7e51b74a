"""The `/ltm` chat commands' replies: code → (English, Chinese). The Chinese name the
commands by their Chinese aliases, so a reply's "send …" works when typed back.
"""

TEXTS: dict[str, tuple[str, str]] = {
    # -- help and targets -------------------------------------------------------
    "cmd.target_syntax": (
        "<user id>, user:<user id> or group:<group id> (e.g. qq:12345, group:qq:67890)",
        "<用户 ID>、user:<用户 ID> 或 group:<群 ID>（例如 qq:12345、group:qq:67890）"),
    "cmd.help": (
        "/ltm status — what the bot keeps about you\n"
        "/ltm list — your memories (id, type, status)\n"
        "/ltm remember <fact> — store a fact now\n"
        "/ltm forget <id> — delete one of your memories\n"
        "/ltm forget-all — delete all your memories (asks to confirm)\n"
        "/ltm pause, /ltm resume — stop or restart learning about you "
        "(what you say while paused, in groups too, is never learned)\n"
        "Operators: /ltm pending, /ltm approve <id>, /ltm reject <id>,\n"
        "/ltm status <target>, /ltm list <target>, /ltm forget <id> (any memory),\n"
        "/ltm forget-all <target> (asks to confirm),\n"
        "/ltm policy, /ltm policy history, /ltm policy rollback <version>,\n"
        "/ltm writes off|on <target>, /ltm resume <target> (lift a user's pause)\n"
        "<target> is {target}",
        "/ltm 状态 — 我记着你的哪些内容\n"
        "/ltm 列表 — 你的记忆（ID、类型、状态）\n"
        "/ltm 记住 <事实> — 立即记下一条事实\n"
        "/ltm 忘记 <ID> — 删除你的一条记忆\n"
        "/ltm 全部忘记 — 删除你的全部记忆（会先请你确认）\n"
        "/ltm 暂停、/ltm 恢复 — 停止或重新开始学习关于你的内容（暂停期间你说的话永远不会被学习，群里也是）\n"
        "管理员：/ltm 待审、/ltm 批准 <ID>、/ltm 驳回 <ID>、\n"
        "/ltm 状态 <目标>、/ltm 列表 <目标>、/ltm 忘记 <ID>（任意记忆）、\n"
        "/ltm 全部忘记 <目标>（会先请你确认）、\n"
        "/ltm 策略、/ltm 策略 历史、/ltm 策略 回滚 <版本号>、\n"
        "/ltm 写入 关|开 <目标>、/ltm 恢复 <目标>（解除某用户的暂停）\n"
        "<目标> 为 {target}\n"
        "英文指令名同样可用（status、list、remember……），回复使用你的语言。"),
    "cmd.no_scope_id": ("No scope id given. Target: {target}.", "没有给出范围 ID。目标：{target}。"),
    "cmd.nothing_in": ("I keep no memories in {scope}. (Target: {target}.)",
                       "{scope} 中没有任何记忆。（目标：{target}。）"),
    "cmd.operator_only.see": ("Only an operator can see other users' memories.",
                              "只有管理员可以查看其他用户的记忆。"),
    "cmd.operator_only.delete": ("Only an operator can delete other users' memories.",
                                 "只有管理员可以删除其他用户的记忆。"),
    "cmd.operator_only.review": ("Only an operator can review memories.", "只有管理员可以审核记忆。"),
    "cmd.operator_only.policy": ("Only an operator can see or change the policy.",
                                 "只有管理员可以查看或修改策略。"),
    "cmd.operator_only.writes": (
        "Only an operator can switch another scope's writes; /ltm pause stops learning about you.",
        "只有管理员可以开关其他范围的写入；发送 /ltm 暂停 可停止学习关于你的内容。"),
    # -- words inside replies ------------------------------------------------------
    # A memory's type reads as on the review page and in the settings form (views.review.types).
    "cmd.kind.user": ("user", "用户"),
    "cmd.kind.group": ("group", "群聊"),
    "cmd.state.active": ("active", "生效"),
    "cmd.state.shadow": ("shadow", "待审核"),
    "cmd.state.disabled": ("disabled", "已停用"),
    "cmd.state.expired": ("expired", "已过期"),
    "cmd.state.superseded": ("superseded", "已被取代"),
    "cmd.state.awaiting_approval": ("awaiting approval", "待批准"),
    "cmd.type.profile": ("profile", "个人资料"),
    "cmd.type.preference": ("preference", "偏好"),
    "cmd.type.task_state": ("task_state", "任务状态"),
    "cmd.type.constraint": ("constraint", "约束"),
    "cmd.type.episode": ("episode", "事件"),
    "cmd.type.summary": ("summary", "摘要"),
    # A write mode (config.py) as a person reads it, what it does with what is learnt
    # (i18n.WORDS: a {mode} in Chinese; English shows the mode's own word).
    "cmd.mode.shadow": ("shadow mode", "仅记录（新记忆经管理员批准后才会用到）"),
    "cmd.mode.auto": ("auto mode", "自动（可信的新记忆立即用到）"),
    "cmd.mode.manual": ("manual mode", "人工审批（每条新记忆都需管理员批准）"),
    "cmd.on": ("on", "开启"),
    "cmd.off": ("off", "关闭"),
    "cmd.none": ("none", "无"),
    # -- status and list -------------------------------------------------------------
    "cmd.status.nothing": ("I don't keep any memories about you yet.", "我还没有记下任何关于你的内容。"),
    "cmd.status.line": ("{kind} {scope_id}: {counts}; {pending} message(s) waiting for extraction",
                        "{kind} {scope_id}：{counts}；{pending} 条消息等待提取"),
    "cmd.status.count": ("{n} {state}", "{state} {n} 条"),
    "cmd.status.no_memories": ("no memories", "没有记忆"),
    "cmd.status.mode": ("Write mode: {mode}.", "写入模式：{mode}。"),
    "storage.size": ("Memory on disk: {total} (tables {tables}, vector files {files}; the database file {file}).",
                     "记忆占用磁盘：{total}（数据表 {tables}，向量文件 {files}；数据库文件共 {file}）。"),
    "storage.growth": ("It grows about {growth} a day ({turns} turns in the last 7 days).",
                       "每天约增长 {growth}（最近 7 天 {turns} 条对话）。"),
    "storage.oldest": ("Oldest turn kept: {at} ({turns} turns kept).", "保留的最早对话：{at}（共 {turns} 条）。"),
    "cmd.status.read_only": ("Writes are paused (emergency read-only).", "写入已暂停（紧急只读）。"),
    "cmd.list.nothing": ("I don't remember anything about you.", "我没有记住任何关于你的内容。"),
    "cmd.list.more": ("… and {n} more", "……还有 {n} 条"),
    # -- remember and forget ------------------------------------------------------------
    "cmd.remember.usage": ("Usage: /ltm remember <fact>", "用法：/ltm 记住 <事实>"),
    "cmd.remember.refused": ("Not stored: {error}.", "未保存：{error}。"),
    "cmd.remember.dropped": ("Not stored: {reason}", "未保存：{reason}"),
    "cmd.remember.read_only": ("Memory is read-only right now (emergency read-only); nothing was stored.",
                               "记忆目前为只读（紧急只读），没有保存任何内容。"),
    "cmd.remember.done": ("Remembered ({id}): {fact}.", "已记住（{id}）：{fact}。"),
    "cmd.remember.done_held": ("Remembered ({id}): {fact}. I will use it once an operator approves it.",
                               "已记住（{id}）：{fact}。管理员批准后我才会用到它。"),
    "cmd.forget.done": ("Forgotten: {fact}", "已忘记：{fact}"),
    "cmd.forget.done_in": ("Forgotten: {fact} ({scope})", "已忘记：{fact}（{scope}）"),
    "cmd.read_only.nothing_deleted": ("Memory is read-only right now; nothing was deleted.",
                                      "记忆目前为只读，没有删除任何内容。"),
    "cmd.read_only.nothing_changed": ("Memory is read-only right now; nothing changed.",
                                      "记忆目前为只读，没有做任何更改。"),
    # -- forget-all -----------------------------------------------------------------
    "cmd.forget_all.confirm_own": ("/ltm forget-all confirm", "/ltm 全部忘记 确认"),
    "cmd.forget_all.confirm_target": ("/ltm forget-all {target} confirm", "/ltm 全部忘记 {target} 确认"),
    "cmd.forget_all.ask_own": (
        "This deletes all {total} memories I keep about you, and nothing said before is quoted again. "
        "Send {command} within 2 minutes to go ahead.",
        "这会删除我记着的关于你的全部 {total} 条记忆，之前说过的话也不会再被引用。"
        "如确定，请在 2 分钟内发送 {command}。"),
    "cmd.forget_all.ask_target": (
        "This deletes all {total} memories of {target}, and nothing said before is quoted again. "
        "Send {command} within 2 minutes to go ahead.",
        "这会删除 {target} 的全部 {total} 条记忆，之前说过的话也不会再被引用。"
        "如确定，请在 2 分钟内发送 {command}。"),
    "cmd.forget_all.read_only_own": (
        "Memory is read-only right now (emergency read-only): deleting the {total} memories I keep about you "
        "would be refused. Once read-only is off, send {command} within 2 minutes of asking again.",
        "记忆目前为只读（紧急只读）：删除我记着的关于你的 {total} 条记忆会被拒绝。"
        "只读关闭后，请重新发起，并在 2 分钟内发送 {command}。"),
    "cmd.forget_all.read_only_target": (
        "Memory is read-only right now (emergency read-only): deleting the {total} memories of {target} "
        "would be refused. Once read-only is off, send {command} within 2 minutes of asking again.",
        "记忆目前为只读（紧急只读）：删除 {target} 的 {total} 条记忆会被拒绝。"
        "只读关闭后，请重新发起，并在 2 分钟内发送 {command}。"),
    "cmd.forget_all.done_own": ("Deleted {count} memories.", "已删除 {count} 条记忆。"),
    "cmd.forget_all.done_target": ("Deleted {count} memories of {target}.", "已删除 {target} 的 {count} 条记忆。"),
    # -- review -------------------------------------------------------------------------
    "cmd.pending.nothing": ("No memories await approval.", "没有待批准的记忆。"),
    "cmd.pending.head": ("{total} awaiting approval:", "{total} 条记忆待批准："),
    "cmd.review.approved": ("Approved: {fact}", "已批准：{fact}"),
    "cmd.review.rejected": ("Rejected: {fact}", "已驳回：{fact}"),
    # -- policy ---------------------------------------------------------------------------
    "cmd.policy.current": (
        "Policy version {version}: memory {memory}, write mode {mode} (writes {writes}), reads {reads}, "
        "read-only {read_only}; writes off for: {off}.",
        "策略版本 {version}：记忆{memory}，写入模式 {mode}（写入{writes}），读取{reads}，"
        "只读{read_only}；已关闭写入的范围：{off}。"),
    "cmd.policy.none_recorded": ("(none recorded)", "（未记录）"),
    "cmd.policy.no_history": ("No policy version is recorded yet.", "还没有记录任何策略版本。"),
    "cmd.policy.line": ("v{version} {at} {actor} ({source}){reason}: {changes}{more}",
                        "v{version} {at} {actor}（{source}）{reason}：{changes}{more}"),
    "cmd.policy.line_reason": (" — {reason}", " — {reason}"),
    "cmd.policy.initial": ("initial policy", "初始策略"),
    "cmd.policy.no_change": ("no setting changed", "没有设置变化"),
    "cmd.policy.more": (" (+{n} more)", "（另有 {n} 项）"),
    "cmd.policy.rollback_usage": ("Usage: /ltm policy rollback <version> (a number from /ltm policy history)",
                                  "用法：/ltm 策略 回滚 <版本号>（/ltm 策略 历史 中列出的数字）"),
    "cmd.policy.not_rolled_back": ("Not rolled back: {error}.", "未回滚：{error}。"),
    "cmd.policy.already": ("Version {version}'s policy is already in force; nothing changed.",
                           "版本 {version} 的策略已在生效，没有做任何更改。"),
    "cmd.policy.rolled_back": ("Rolled back to version {version}'s policy, now version {new}.",
                               "已回滚到版本 {version} 的策略，当前为版本 {new}。"),
    "cmd.policy.usage": ("Usage: /ltm policy, /ltm policy history, /ltm policy rollback <version>",
                         "用法：/ltm 策略、/ltm 策略 历史、/ltm 策略 回滚 <版本号>"),
    # -- an operator's write switch --------------------------------------------------------
    "cmd.writes.usage": ("Usage: /ltm writes off|on <target>; <target> is {target}",
                         "用法：/ltm 写入 关|开 <目标>；<目标> 为 {target}"),
    "cmd.writes.refused": ("Nothing changed: {error}.", "没有做任何更改：{error}。"),
    "cmd.read_only.emergency": ("Memory is read-only right now (emergency read-only); nothing changed.",
                                "记忆目前为只读（紧急只读），没有做任何更改。"),
    "cmd.writes.already": ("Learning for {scope} is already {state}.", "{scope} 的学习已经是{state}状态。"),
    "cmd.writes.back_on": (
        "Learning for {scope} is back on (policy version {version}). "
        "What was said while it was off stays unlearned.",
        "{scope} 的学习已重新开启（策略版本 {version}）。关闭期间说的话仍不会被学习。"),
    "cmd.writes.now_off": (
        "Learning for {scope} is off (policy version {version}): nothing new is learned "
        "from what is said now; what is already known is still used.",
        "{scope} 的学习已关闭（策略版本 {version}）：从现在起不会再从对话中学习新内容；已记住的内容仍会使用。"),
    # -- asked without what they act on (main.py answers these itself) ---------------
    "cmd.forget.usage": ("Which memory? Usage: /ltm forget <id>; /ltm list shows the ids.",
                         "要忘记哪一条？用法：/ltm 忘记 <ID>；发送 /ltm 列表 查看 ID。"),
    "cmd.review.usage_approve": ("Which memory? Usage: /ltm approve <id>; /ltm pending shows the ids.",
                                 "要批准哪一条？用法：/ltm 批准 <ID>；发送 /ltm 待审 查看 ID。"),
    "cmd.review.usage_reject": ("Which memory? Usage: /ltm reject <id>; /ltm pending shows the ids.",
                                "要驳回哪一条？用法：/ltm 驳回 <ID>；发送 /ltm 待审 查看 ID。"),
    # -- a target named as a person sees it (operating/targets.py) ----------------------
    "target.ambiguous": ("{target} could be {matches}; name one of them.",
                         "{target} 可能是 {matches}；请指明其中一个。"),
    "target.suggest": ("Did you mean {matches}?", "你是不是要找 {matches}？"),
    "target.unknown": ("Nothing is kept of {target}; did you mean {matches}?",
                       "没有 {target} 的任何记录；你是不是要找 {matches}？"),
}
