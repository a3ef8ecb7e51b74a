"""Reasons and verdicts stored in English (the audit log is one language for every
reader) and shown in the reader's language: code → (English, Chinese).
"""

TEXTS: dict[str, tuple[str, str]] = {
    # -- held for review, the write gate (learning/policy.py, instructions.py) -----
    "held.instruction": ("held for review: reads as an instruction or a marker, not a fact: {text}",
                         "读起来像指令或标记，而不是事实：{text}"),
    # Shown under "why it waits" (等待原因): the Chinese says why first, not "待审核" again.
    "held.for_review": ("held for review: {why}", "{why}（需人工审核）"),
    "reason.instruction": ("reads as an instruction or a marker, not a fact: {text}",
                           "读起来像指令或标记，而不是事实：{text}"),
    "gate.disabled": ("write policy disabled", "写入策略已停用"),
    "gate.memory_off": ("memory off", "记忆已关闭"),
    "gate.read_only": ("emergency_read_only", "紧急只读"),
    "gate.type_not_allowed": ("type {type} not in allowed_types", "类型“{type}”不在允许的记忆类型中"),
    "gate.session_cap": ("max_writes_per_session ({max}) reached", "已达到每个会话最多新增的记忆数（{max}）"),
    "gate.hour_cap": ("max_writes_per_hour ({max}) reached", "已达到每小时最多新增的记忆数（{max}）"),
    "gate.shadow": ("mode shadow: stored, not injected", "影子模式：已保存，不注入"),
    "gate.manual": ("mode manual: awaiting approval", "人工模式：每条新记忆都需批准"),
    "gate.type_approval": ("type {type} requires approval", "“{type}”类型的记忆需要审批"),
    "gate.confidence": ("confidence {confidence} < min_confidence {min}",
                        "置信度 {confidence} 低于最低置信度 {min}"),
    "gate.evidence": ("evidence {count} < min_evidence_count {min}", "证据数 {count} 少于最少证据数 {min}"),
    "gate.auto": ("mode auto: thresholds met", "自动模式：达到阈值"),
    # -- learning's other reasons (learning/writer.py, worker, summaries …) ------------
    "learn.writes_off": ("writes are switched off for {scope}", "{scope} 的写入已关闭"),
    "learn.empty_key": ("empty fact key", "事实键为空"),
    "learn.fact_too_long": ("fact longer than {max} characters", "事实超过 {max} 个字符"),
    "learn.tombstoned": ("tombstoned by {actor}: {reason}", "已被 {actor} 删除并标记：{reason}"),
    "learn.new_evidence": ("new evidence; the memory stays {status}", "新的证据；记忆仍为“{status}”"),
    "learn.restated": ("the user explicitly restated a deleted fact", "用户明确重新说出了一条已删除的事实"),
    "learn.superseded": ("a newer value superseded it", "被更新的值取代"),
    "learn.evicted": ("max_items_per_scope ({cap}) reached; {rule}", "已达到每个范围最多记忆数（{cap}）；{rule}"),
    # learning/writer.py's eviction_rule, the {rule} above
    "learn.eviction_rule": ("lowest importance, oldest", "先淘汰重要度最低、最久未确认的"),
    "learn.invalid_candidate": ("invalid candidate: {reason}", "无效的候选：{reason}"),
    "learn.rolled_into_summary": ("rolled into the {level} summary, period over {days} days ago",
                                  "已并入{level}摘要，该时段已结束超过 {days} 天"),
    "learn.near_duplicate_merged": ("a near-duplicate was merged into it", "一条近似重复的记忆已合并到这里"),
    "learn.merged_into": ("merged into a memory that says the same", "已合并到一条内容相同的记忆"),
    "learn.expired": ("older than its retention of {days} days", "超过了 {days} 天的保留期"),
    "learn.turns_deleted": ("turns older than {days} days that no memory cites (retention_days.turns)",
                            "超过 {days} 天且未被任何记忆引用的对话（retention_days.turns）"),
    "audit.compacted": ("compacted by an operator: turns older than {days} days that no memory cites",
                        "管理员压缩：超过 {days} 天且未被任何记忆引用的对话"),
    # -- operators (operating/admin.py, the chat commands) -----------------------
    "audit.approved": ("approved", "已批准"),
    "audit.rejected": ("rejected", "已驳回"),
    "audit.edited": ("edited", "已编辑"),
    "audit.deleted": ("deleted", "已删除"),
    "audit.deleted_dashboard": ("deleted in the dashboard", "在管理面板中删除"),
    "audit.policy_dashboard": ("policy changed in the dashboard", "在管理面板中修改了策略"),
    "audit.forget_all": ("forget-all", "全部遗忘（forget-all）"),
    "audit.restored": ("the value that superseded it was rejected: {reason}", "取代它的值被驳回：{reason}"),
    "audit.forgotten_by_user": ("forgotten by the user", "由用户遗忘"),
    "audit.forgotten_by_operator": ("forgotten by the operator", "由管理员遗忘"),
    "audit.imported": ("imported", "已导入"),
    "audit.drift_rollback": ("drift alarm on {kind} memories: similarity {similarity} < {threshold} under policy "
                             "version {version}",
                             "{kind} 记忆出现漂移告警：在策略版本 {version} 下相似度 {similarity} < {threshold}"),
    # -- policy history (operating/policy_versions.py, the chat commands) ---------
    "policy.first_start": ("the policy in force at the first start", "首次启动时生效的策略"),
    "policy.webui": ("changed in AstrBot's plugin config (seen when the plugin loaded)",
                     "在 AstrBot 插件配置中修改（插件加载时发现）"),
    "policy.version": ("policy version {version} ({source})", "策略版本 {version}（{source}）"),
    # Where a version came from (enums.PolicySource), the {source} above.
    "policy.source.api": ("api", "HTTP 接口"),
    "policy.source.page": ("page", "审核页"),
    "policy.source.command": ("command", "聊天命令"),
    "policy.source.webui-config": ("webui-config", "AstrBot 插件配置"),
    "policy.source.rollback": ("rollback", "回滚"),
    "policy.source.startup": ("startup", "首次启动"),
    "policy.source.pauses-moved": ("pauses-moved", "用户暂停移出策略"),
    "policy.caught_up": ("changed in AstrBot's plugin config while emergency read-only was on (recorded once it "
                         "was off)",
                         "在紧急只读开启期间于 AstrBot 插件配置中修改（只读关闭后记录）"),
    "policy.rollback": ("rollback to version {version}", "回滚到版本 {version}"),
    "policy.rollback_why": ("rollback to version {version}: {reason}", "回滚到版本 {version}：{reason}"),
    "policy.writes_on": ("writes on for {scope}", "开启 {scope} 的写入"),
    "policy.writes_off": ("writes off for {scope}", "关闭 {scope} 的写入"),
    # -- import (operating/transfer.py) ----------------------------------------------
    "import.already_present": ("already present", "已存在"),
    "import.deleted_here": ("an operator deleted or rejected it on this bot", "管理员已在本机器人上删除或驳回它"),
    "import.forgotten_here": ("the person asked this bot to forget it", "本人已要求本机器人忘记它"),
    "import.already_merged": ("already merged", "已合并过"),
    # -- replay verdicts and progress (operating/replay.py, jobs) -----------------
    "replay.budget": ("do not switch: {count} reads would exceed the token budget",
                      "不要切换：{count} 次读取会超出 token 预算"),
    "replay.unsafe": ("do not switch: {count} instruction-like or cross-scope candidates would go live "
                      "(current: {current})",
                      "不要切换：{count} 条像指令或跨范围的候选会生效（当前：{current}）"),
    "replay.better": ("the candidate scores better ({candidate} vs {current}, +{delta})",
                      "候选策略得分更高（{candidate} 对 {current}，+{delta}）"),
    "replay.worse": ("the candidate scores worse ({candidate} vs {current}, {delta}): keep the current policy",
                     "候选策略得分更低（{candidate} 对 {current}，{delta}）：保留当前策略"),
    "replay.same": ("no material difference ({candidate} vs {current}; |Δ| ≤ {margin})",
                    "没有实质差别（{candidate} 对 {current}；|Δ| ≤ {margin}）"),
    "progress.waiting": ("waiting {done} / {total}", "等待中 {done} / {total}"),
    "progress.loading": ("loading {done} / {total}", "加载中 {done} / {total}"),
    "progress.replaying": ("replaying {done} / {total}", "回放中 {done} / {total}"),
    "progress.tuning": ("tuning {done} / {total}", "调参中 {done} / {total}"),
    # -- tuning results (operating/tuning.py) -----------------------------------------
    "tune.keep": ("no grid point beats the current policy on the fitting part by more than {margin}; "
                  "nothing to propose",
                  "没有任何网格点在拟合部分上比当前策略高出 {margin} 以上；没有可提议的修改"),
    "tune.overfitted": ("better on the fitting part ({fit} vs {current_fit}) but worse on the holdout set "
                        "({hold} vs {current_hold}): overfitted, not proposed",
                        "在拟合部分上更好（{fit} 对 {current_fit}），但在留出集上更差（{hold} 对 {current_hold}）："
                        "过拟合，不提议"),
    "tune.proposed": ("better on the fitting part ({fit} vs {current_fit}) and not worse on the holdout set "
                      "({hold} vs {current_hold}); apply it as a new policy or discard it",
                      "在拟合部分上更好（{fit} 对 {current_fit}），在留出集上不差（{hold} 对 {current_hold}）："
                      "可将其应用为新策略，或放弃"),
}
