/* Operator review page of astrbot_plugin_ltm.
 *
 * Runs in AstrBot's sandboxed plugin-view iframe: every API call goes
 * through window.AstrBotPluginPage (the dashboard's bridge), texts come from
 * .astrbot-plugin/i18n/<locale>.json under "views.review" with the English
 * below as the fallback, and user text only ever reaches the page through
 * textContent: no string is ever parsed as HTML.
 */
(function () {
  "use strict";

  // English texts, used when a key is missing from the locale files.
  // Kept identical to en-US.json "views.review" (a test checks it).
  const FALLBACK_EN = /*FALLBACK_EN_START*/{
    "title": "Memory review",
    "subtitle": "Review, search and govern long-term memories",
    "ro.on_title": "EMERGENCY READ-ONLY IS ON",
    "ro.on_text": "Every write to the memory store is stopped: no recording, extraction, review, edits or imports. Reading and injection go on.",
    "ro.off_title": "Writes allowed",
    "ro.off_text": "Memories are recorded and written under the policy. Switch on emergency read-only to stop every write at once.",
    "ro.unknown": "Loading the memory state…",
    "ro.switch": "Emergency read-only",
    "ro.confirm_on_title": "Turn emergency read-only ON?",
    "ro.confirm_on": "Every write to the memory store stops immediately: nothing is recorded, extracted, edited or imported until you turn it off. Reading and injection go on.",
    "ro.confirm_off_title": "Turn emergency read-only OFF?",
    "ro.confirm_off": "Recording, extraction and edits resume immediately.",
    "ro.turn_on": "Turn read-only ON",
    "ro.turn_off": "Turn read-only OFF",
    "ro.turned_on": "Emergency read-only is on.",
    "ro.turned_off": "Emergency read-only is off; writes resume.",
    "summary.mode": "Mode",
    "summary.queue": "To review",
    "summary.pending": "Awaiting approval",
    "summary.total": "Memories",
    "summary.failed": "Failed events",
    "tabs.review": "Review queue",
    "tabs.memories": "All memories",
    "tabs.stats": "Statistics",
    "tabs.policy": "Policy",
    "tabs.transfer": "Import / export",
    "tabs.audit": "Audit log",
    "tabs.user": "User",
    "tabs.preview": "Injection preview",
    "common.refresh": "Refresh",
    "common.any": "Any",
    "common.cancel": "Cancel",
    "common.close": "Close",
    "common.save": "Save",
    "common.prev": "Previous",
    "common.next": "Next",
    "common.page": "Page {page} of {pages} · {total} in total",
    "common.error": "Failed: {message}",
    "common.readonly_blocked": "Emergency read-only is on: writes are disabled.",
    "common.no_bridge": "This page must be opened from the AstrBot dashboard (the plugin page bridge is missing).",
    "common.none": "—",
    "common.permanent": "permanent",
    "common.days": "{n} days",
    "fields.memory_id": "Memory id",
    "fields.fact": "Fact",
    "fields.fact_key": "Fact key",
    "fields.type": "Type",
    "fields.scope": "Scope",
    "fields.scope_id": "Scope id",
    "fields.status": "Status",
    "fields.confidence": "Confidence",
    "fields.importance": "Importance",
    "fields.evidence_count": "Evidence",
    "fields.ttl_days": "Keep for",
    "fields.created_at": "Created",
    "fields.updated_at": "Updated",
    "fields.valid_from": "Valid from",
    "fields.valid_to": "Valid until",
    "fields.held_reason": "Why it waits",
    "fields.uses": "Uses",
    "fields.uses_detail": "{injected} injected · {tool} by the tool",
    "fields.last_used_at": "Last used",
    "fields.never_used": "never used",
    "types.profile": "profile",
    "types.preference": "preference",
    "types.task_state": "task state",
    "types.constraint": "constraint",
    "types.episode": "episode",
    "types.summary": "summary",
    "status.active": "active",
    "status.shadow": "shadow",
    "status.disabled": "disabled",
    "status.expired": "expired",
    "status.pending": "awaiting approval",
    "status.superseded": "superseded",
    "scope.user": "User",
    "scope.group": "Group",
    "queue.show": "Show",
    "queue.filter_all": "All shadow memories",
    "queue.filter_pending": "Awaiting approval only",
    "queue.empty": "Nothing to review. New shadow memories and memories awaiting approval appear here.",
    "queue.count": "{total} to review",
    "queue.select_all": "Select all on this page",
    "queue.selected": "{n} selected",
    "queue.approve": "Approve",
    "queue.reject": "Reject",
    "queue.edit": "Edit",
    "queue.details": "Details",
    "queue.select": "Select this memory",
    "queue.approve_selected": "Approve selected",
    "queue.reject_selected": "Reject selected",
    "queue.edit_selected": "Edit selected",
    "queue.reason_placeholder": "Reason (optional, kept in the audit log)",
    "queue.approved": "{n} approved",
    "queue.rejected": "{n} rejected (tombstoned: it will not be learned again)",
    "queue.awaiting": "awaiting approval",
    "queue.confirm_reject_title": "Reject {n} memories?",
    "queue.confirm_reject": "Rejected memories are deleted and tombstoned, so extraction cannot learn them again.",
    "search.q": "Text",
    "search.q_placeholder": "Search facts (any language)",
    "search.apply": "Search",
    "search.reset": "Reset",
    "search.sort": "Sort by",
    "search.min_confidence": "Min. confidence",
    "search.page_size": "Per page",
    "search.sort_note": "With a text query, results are ranked by relevance.",
    "search.empty": "No memory matches.",
    "search.meaning": "By meaning",
    "sort.updated": "last update",
    "sort.created": "creation",
    "sort.confidence": "confidence",
    "sort.importance": "importance",
    "sort.least_used": "least used (never used first)",
    "sort.most_used": "most used",
    "detail.title": "Memory details",
    "detail.evidence": "Evidence and source events",
    "detail.no_evidence": "No evidence is linked to this memory.",
    "detail.event_missing": "The source event is no longer stored.",
    "detail.method": "Method",
    "detail.sender": "Sender",
    "detail.session": "Session",
    "detail.source": "Source",
    "detail.disable": "Disable",
    "detail.enable": "Enable",
    "detail.delete": "Delete",
    "detail.confirm_delete_title": "Delete this memory?",
    "detail.confirm_delete": "It is removed and tombstoned, so extraction cannot learn it again.",
    "detail.deleted": "Memory deleted.",
    "detail.updated": "Memory updated.",
    "detail.history": "Values of this fact over time",
    "detail.current": "current",
    "detail.is_history": "A newer value superseded this one; it is kept as history and never shown to the model.",
    "edit.title": "Edit memory",
    "edit.importance_hint": "0 to 1",
    "edit.nothing": "Nothing was changed.",
    "edit.bulk_title": "Edit {n} memories",
    "edit.bulk_hint": "Only what you fill in is changed; the facts stay as they are.",
    "edit.unchanged": "(unchanged)",
    "edit.bulk_done": "{n} memories updated.",
    "edit.bulk_failed": "{n} could not be updated: {message}",
    "stats.items": "Memories",
    "stats.shadow": "Shadow",
    "stats.awaiting": "Awaiting approval",
    "stats.pending_events": "Events waiting for extraction",
    "stats.failed_events": "Failed events",
    "stats.writes_last_hour": "Writes, last hour",
    "stats.dropped_ro": "Events not recorded (read-only)",
    "stats.per_scope": "Per scope",
    "stats.by_status": "By status",
    "stats.by_type": "By type",
    "stats.events": "Events",
    "stats.show": "Show memories",
    "stats.empty": "No memories or events yet.",
    "stats.ev_pending": "pending {n}",
    "stats.ev_done": "done {n}",
    "stats.ev_failed": "failed {n}",
    "stats.ev_skipped": "skipped {n}",
    "stats.notices": "What limits memory right now",
    "policy.general": "General",
    "policy.enable": "Long-term memory enabled",
    "policy.readonly_hint": "The emergency read-only switch is at the top of the page.",
    "policy.write": "Write policy",
    "policy.write_enable": "Allow new memories",
    "policy.mode": "Write mode",
    "policy.thresholds": "Thresholds",
    "policy.min_confidence": "Minimum confidence (0–1)",
    "policy.min_evidence_count": "Minimum evidence",
    "policy.allowed_types": "Allowed memory types",
    "policy.require_approval_types": "Types that need approval (even in auto mode)",
    "policy.limits": "Limits",
    "policy.max_writes_per_session": "Max new memories per conversation",
    "policy.max_writes_per_hour": "Max new memories per hour (per scope)",
    "policy.max_items_per_scope": "Max memories per scope",
    "policy.read": "Read policy",
    "policy.read_enable": "Inject memories",
    "policy.budget": "Read budget",
    "policy.max_tokens": "Max injected tokens",
    "policy.max_items": "Max memories injected",
    "policy.max_per_type": "Max per type",
    "policy.read_min_confidence": "Minimum confidence to inject",
    "policy.ranking": "Ranking weights",
    "policy.similarity_weight": "Similarity weight",
    "policy.importance_weight": "Importance weight",
    "policy.recency_weight": "Recency weight",
    "policy.injection_position": "Where memories are injected",
    "policy.save": "Save policy",
    "policy.discard": "Discard changes",
    "policy.saved": "Policy saved; it applies now.",
    "policy.warnings": "Configuration warnings",
    "mode.shadow": "shadow: stored for review, never injected",
    "mode.auto": "auto: active once the thresholds pass",
    "mode.manual": "manual: every memory waits for approval",
    "position.context_message": "in the user's message (not saved)",
    "position.system_prompt": "in the system prompt",
    "transfer.export_title": "Export",
    "transfer.export_hint": "A JSON file with every matching memory, its evidence and source events, and checksums.",
    "transfer.download": "Download export",
    "transfer.downloaded": "Export downloaded.",
    "transfer.import_title": "Import",
    "transfer.import_hint": "Choose an export file. You see what it would add, merge or skip before anything is written.",
    "transfer.reading": "Checking {name}…",
    "transfer.read_only": "emergency read-only is on: importing would be refused until it is turned off.",
    "transfer.too_big": "This file is larger than 20 MiB.",
    "transfer.preview_title": "Preview (dry run: nothing written yet)",
    "transfer.added": "to add",
    "transfer.merged": "to merge",
    "transfer.skipped": "to skip",
    "transfer.added_done": "added",
    "transfer.merged_done": "merged",
    "transfer.skipped_done": "skipped",
    "transfer.confirm": "Import now",
    "transfer.done": "Imported {name}: {added} added, {merged} merged, {skipped} skipped.",
    "transfer.nothing": "Nothing to import: every memory is already here.",
    "transfer.for_review": "Import for review: every memory arrives as shadow, in the review queue",
    "audit.time": "Time",
    "audit.action": "Action",
    "audit.actor": "Actor",
    "audit.reason": "Reason",
    "audit.detail": "Detail",
    "audit.empty": "No audit entries.",
    "audit.yes": "yes",
    "audit.no": "no",
    "audit.count": "{n} items",
    "audit.raw": "Raw JSON",
    "audit.field.fact": "Fact",
    "audit.field.previous_fact": "Previous fact",
    "audit.field.confidence": "Confidence",
    "audit.field.importance": "Importance",
    "audit.field.evidence_count": "Evidence",
    "audit.field.status": "Status",
    "audit.field.old": "Before",
    "audit.field.new": "After",
    "audit.field.events": "Events",
    "audit.field.supersedes": "Supersedes",
    "audit.field.version": "Policy version",
    "audit.field.source": "Source",
    "audit.field.rollback_of": "Rollback to",
    "audit.field.diff": "Changes",
    "audit.field.changes": "Changes",
    "audit.field.type": "Type",
    "audit.field.decision": "Decision",
    "audit.field.fact_key": "Fact key",
    "audit.field.into": "Merged into",
    "audit.field.into_fact": "Merged into fact",
    "audit.field.merged": "Merged",
    "audit.field.merged_fact": "Merged fact",
    "audit.field.cosine": "Similarity",
    "audit.field.snapshot_id": "Drift snapshot",
    "audit.field.from_version": "From version",
    "audit.field.to_version": "To version",
    "audit.field.imported_fact": "Imported fact",
    "audit.field.imported_memory_id": "Imported memory",
    "audit.field.level": "Level",
    "audit.field.period": "Period",
    "audit.field.raw": "Raw answer",
    "audit.field.result": "Result",
    "audit.field.shared_words": "Shared words",
    "audit.field.unsure": "Flagged for review",
    "audit.flagged": "Only updates flagged for review",
    "audit.actions.create": "created",
    "audit.actions.confirm": "confirmed",
    "audit.actions.merge": "merged",
    "audit.actions.supersede": "superseded",
    "audit.actions.restore": "restored",
    "audit.actions.policy": "policy decision",
    "audit.actions.status": "status changed",
    "audit.actions.revive": "revived",
    "audit.actions.evict": "evicted",
    "audit.actions.compact": "compacted",
    "audit.actions.approve": "approved",
    "audit.actions.reject": "rejected",
    "audit.actions.delete": "deleted",
    "audit.actions.edit": "edited",
    "audit.actions.expire": "expired",
    "audit.actions.import": "imported",
    "audit.actions.config": "policy changed",
    "audit.actions.drift_rollback": "drift rollback",
    "audit.actions.pause": "paused",
    "audit.actions.resume": "resumed",
    "audit.actions.lift": "pause lifted",
    "evidence.method.llm_extract": "model extraction",
    "evidence.method.rule": "rule",
    "evidence.method.user_explicit": "the user said so explicitly",
    "evidence.method.summary": "summary",
    "evidence.source.message": "message",
    "evidence.source.tool_result": "tool result",
    "evidence.source.system": "system",
    "evidence.role.user": "user",
    "evidence.role.assistant": "assistant",
    "evidence.role.tool": "tool",
    "evidence.role.system": "system",
    "user.open": "Open this user's view",
    "user.intro": "One user's or group's memories, recent events, pause state, write switch and audit trail together. Click a scope in the statistics or the memory list to open it here.",
    "user.scope": "Scope (user:<id> or group:<id>)",
    "user.scope_placeholder": "e.g. user:webchat:alice",
    "user.show": "Show",
    "user.not_paused": "Learning (not paused)",
    "user.paused": "Paused: learns nothing",
    "user.paused_detail": "since {since}, by {by}",
    "user.lift": "Lift the pause",
    "user.lift_title": "Lift the pause of {scope}?",
    "user.lift_text": "The bot learns from this user again from the next message. The user paused it themselves; lifting it is recorded in the audit log with your reason.",
    "user.lift_reason": "Why (kept in the audit log)",
    "user.lifted": "Pause of {scope} lifted.",
    "user.was_not_paused": "{scope} was not paused.",
    "user.writes": "Writes",
    "user.writes_on": "writes on",
    "user.writes_off": "writes off",
    "user.writes_hint": "The operator's write switch for this scope (a new policy version).",
    "user.switched_on": "Writes on for {scope}.",
    "user.switched_off": "Writes off for {scope}.",
    "user.memories": "Memories ({n})",
    "user.no_memories": "No memories.",
    "user.events": "Recent events",
    "user.no_events": "No events recorded.",
    "user.audit": "Audit trail",
    "user.role": "Who",
    "user.text": "Text",
    "user.extraction_head": "Extraction",
    "user.extraction.pending": "pending",
    "user.extraction.done": "done",
    "user.extraction.failed": "failed",
    "user.extraction.skipped": "skipped",
    "preview.intro": "What the bot would inject for a message, built by the same reader as a real turn: nothing is written and no use is counted.",
    "preview.scope": "User (as the memory list shows it, e.g. user:qq:123)",
    "preview.scope_placeholder": "user:<id>",
    "preview.group": "Group (optional)",
    "preview.persona": "Persona (optional)",
    "preview.message": "Message",
    "preview.message_placeholder": "What the user says",
    "preview.run": "Preview",
    "preview.block": "The injected block",
    "preview.tokens": "{n} tokens",
    "preview.empty": "Nothing would be injected for this message.",
    "preview.lines": "Its lines",
    "preview.cut": "Cut lines",
    "preview.source_head": "Source",
    "preview.id": "Id",
    "preview.score": "Score",
    "preview.tokens_head": "Tokens",
    "preview.line": "Line",
    "preview.why": "Why",
    "preview.no_lines": "No lines.",
    "preview.no_cut": "Nothing was cut.",
    "preview.source.memory": "memory",
    "preview.source.summary": "summary",
    "preview.source.turn": "earlier turn",
    "preview.source.last_time": "last time",
    "history.tab": "Policy history",
    "history.intro": "Every change of the write or read policy, the on/off switch and read-only is a numbered version. Rolling back makes an old version's policy current at once, as a new version.",
    "history.reason_placeholder": "Reason for a rollback or a switch (optional, kept with the version)",
    "history.version": "Version",
    "history.time": "Time",
    "history.who": "Who",
    "history.reason": "Reason",
    "history.changes": "Changes",
    "history.current": "current",
    "history.initial": "the policy at the first start",
    "history.rollback_of": "rollback to version {n}",
    "history.show": "Policy",
    "history.rollback": "Roll back",
    "history.confirm_title": "Roll back to version {n}?",
    "history.confirm_text": "Version {n}'s policy becomes current at once and is saved to the plugin's config. This is recorded as a new version.",
    "history.rolled": "Rolled back: version {n} is in force.",
    "history.unchanged": "Version {n}'s policy is already in force.",
    "history.policy_title": "Policy of version {n}",
    "history.empty": "No policy version recorded yet.",
    "history.writes_head": "Writes",
    "history.writes_on": "learning",
    "history.writes_off": "off",
    "history.switched_off": "Writes off for {scope}.",
    "history.switched_on": "Writes on for {scope}.",
    "history.source.startup": "first start",
    "history.source.api": "API",
    "history.source.page": "this page",
    "history.source.command": "command",
    "history.source.webui-config": "AstrBot config page",
    "history.source.rollback": "rollback",
    "history.source.pauses-moved": "users' pauses moved out of the policy",
    "history.will_change": "What the rollback changes",
    "history.no_change": "Nothing changes: that version's policy is already in force.",
    "history.warnings": "Warnings",
    "drift.tab": "Drift",
    "drift.intro": "Each scope kind's memory distribution is photographed daily and right before and after every policy change. The line is the cosine similarity of each snapshot to the one before; below the threshold (dashed) is an alarm.",
    "drift.chart": "Similarity to the previous snapshot",
    "drift.threshold": "threshold {value}",
    "drift.empty": "No snapshots compared yet: the first daily snapshot is taken at start, the next one a day later or at the next policy change.",
    "drift.recent": "Newest snapshots",
    "drift.when": "When",
    "drift.kind_head": "Scope kind",
    "drift.trigger_head": "Taken",
    "drift.version": "Policy version",
    "drift.similarity": "Similarity",
    "drift.memories": "Memories",
    "drift.alarm": "Alarm",
    "drift.yes": "ALARM",
    "drift.none": "—",
    "drift.kind.user": "users",
    "drift.kind.group": "groups",
    "drift.trigger.daily": "daily",
    "drift.trigger.before": "before a change",
    "drift.trigger.after": "after a change",
    "drift.trigger.manual": "on request",
    "drift.banner": "Drift alarm: the memories of {kind} moved (similarity {similarity} < {threshold}) on {when}. Policy version in force before it: {version}.",
    "drift.banner_unknown": "unknown (policy versions are not recorded)",
    "drift.auto": "Automatic rollback on an alarm: {state}.",
    "drift.on": "on",
    "drift.off": "off",
    "drift.failed": "Could not load the drift snapshots: {message}",
    "drift.min_items": "An alarm needs at least {n} memories of a scope kind: with fewer, the line can dip below the threshold and no alarm is raised.",
    "replay.tab": "Replay",
    "replay.intro": "Replay the recorded history under a candidate policy before switching: the write gate and the reader run on the candidates already extracted and the users' recorded messages, with no model call and nothing written. By default on the holdout set, sessions kept apart for judging.",
    "replay.holdout": "Holdout replay set",
    "replay.holdout_none": "Not drawn yet: the first replay draws a random 20 % of the recent sessions and keeps it.",
    "replay.holdout_info": "{size} of {recorded} recent sessions, drawn {when} ({rule}).",
    "replay.rule_share": "a random {share} %",
    "replay.rule_scopes": "the sessions of {scopes}",
    "replay.share": "Share (%)",
    "replay.redraw": "Redraw",
    "replay.redrawn": "Holdout set drawn again: {size} sessions.",
    "replay.candidate": "Candidate policy (starts from the current one)",
    "replay.mode": "Write mode",
    "replay.w_min_confidence": "Write: minimum confidence",
    "replay.w_min_evidence": "Write: minimum evidence",
    "replay.r_max_tokens": "Read: max tokens",
    "replay.r_max_items": "Read: max memories",
    "replay.r_max_events": "Read: max turns",
    "replay.r_min_confidence": "Read: minimum confidence",
    "replay.set_head": "Replay set",
    "replay.set.holdout": "holdout set",
    "replay.set.fitting": "the other sessions (fitting part)",
    "replay.set.all": "all recorded history",
    "replay.scopes": "Scopes (optional, comma-separated: user:<id>, group:<id>)",
    "replay.since": "Since (optional)",
    "replay.start": "Start replay",
    "replay.cancel": "Cancel",
    "replay.tune": "Tune thresholds",
    "replay.running": "{kind}: {stage} {done} / {total}",
    "replay.cancelled": "The job was cancelled.",
    "replay.failed": "The job failed: {message}",
    "replay.error": "Failed: {message}",
    "replay.report": "Replay report",
    "replay.verdict": "Verdict",
    "replay.speed": "{events} events replayed in {seconds} s: {rate} events/second.",
    "replay.figure": "Figure",
    "replay.current": "Current",
    "replay.cand": "Candidate",
    "replay.active": "Writes: active",
    "replay.shadow": "Writes: shadow",
    "replay.awaiting": "Writes: awaiting approval",
    "replay.refused": "Writes: refused",
    "replay.tokens_mean": "Injected tokens per turn (mean)",
    "replay.tokens_p95": "Injected tokens per turn (p95)",
    "replay.memories": "Memories per block",
    "replay.turns": "Turns per block",
    "replay.violations": "Budget violations",
    "replay.latency": "Read latency p95 (ms)",
    "replay.self_recall": "Self-recall (share)",
    "replay.unsafe": "Unsafe candidates going live",
    "replay.score": "Combined score",
    "replay.chart": "Key figures, current vs candidate",
    "replay.differs": "Memories whose status would differ: {n}",
    "replay.fact": "Fact",
    "replay.type": "Type",
    "replay.scope": "Scope",
    "replay.none": "—",
    "replay.tune_report": "Tuning report",
    "replay.outcome_head": "Outcome",
    "replay.outcome.proposed": "proposed",
    "replay.outcome.overfitted": "overfitted: not proposed",
    "replay.outcome.keep": "keep the current policy",
    "replay.setting": "Setting",
    "replay.fit_score": "Score on the fitting part",
    "replay.hold_score": "Score on the holdout set",
    "replay.apply": "Apply as the new policy",
    "replay.discard": "Discard",
    "replay.applied": "Policy changed.",
    "replay.discarded": "Proposal discarded."
  }/*FALLBACK_EN_END*/;

  const PREFIX = "views.review";
  const MEMORY_TYPES = ["profile", "preference", "task_state", "constraint", "episode", "summary"];
  const MAX_IMPORT_BYTES = 20 * 1024 * 1024;
  const bridge = window.AstrBotPluginPage || window.AstrBotPluginView || null;

  // -- i18n ------------------------------------------------------------------

  function byPath(source, path) {
    let cur = source;
    for (const part of path.split(".")) {
      if (!cur || typeof cur !== "object" || !(part in cur)) return undefined;
      cur = cur[part];
    }
    return cur;
  }

  function locale() {
    try {
      return (bridge && bridge.getLocale()) || "en-US";
    } catch (e) {
      return "en-US";
    }
  }

  /** "zh" or "en": the language the page asks the API to answer in. */
  function lang() {
    return String(locale()).toLowerCase().startsWith("zh") ? "zh" : "en";
  }

  /** The text of ``key`` in the dashboard's language, else English. */
  function T(key, vars) {
    let text;
    try {
      const all = (bridge && bridge.getI18n()) || {};
      for (const loc of [locale(), "en-US"]) {
        const found = byPath(all[loc], PREFIX + "." + key);
        if (typeof found === "string" && found) {
          text = found;
          break;
        }
      }
    } catch (e) {
      text = undefined;
    }
    if (text === undefined) text = FALLBACK_EN[key] !== undefined ? FALLBACK_EN[key] : key;
    if (vars) {
      text = text.replace(/\{(\w+)\}/g, (m, name) => (name in vars ? String(vars[name]) : m));
    }
    return text;
  }

  function applyI18n(root) {
    (root || document).querySelectorAll("[data-i18n]").forEach((el) => {
      el.textContent = T(el.getAttribute("data-i18n"));
    });
    (root || document).querySelectorAll("[data-i18n-placeholder]").forEach((el) => {
      el.setAttribute("placeholder", T(el.getAttribute("data-i18n-placeholder")));
    });
    document.title = T("title");
    document.documentElement.lang = locale();
  }

  // -- DOM helpers (text only through textContent) ---------------------------

  function h(tag, props) {
    const el = document.createElement(tag);
    if (props) {
      for (const [key, value] of Object.entries(props)) {
        if (value === null || value === undefined || value === false) continue;
        if (key === "class") el.className = value;
        else if (key === "text") el.textContent = String(value);
        else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
        else if (key === "checked" || key === "value" || key === "disabled" || key === "selected") el[key] = value;
        else el.setAttribute(key, value === true ? "" : String(value));
      }
    }
    for (let i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }

  function append(el, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) {
      child.forEach((c) => append(el, c));
      return;
    }
    el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }

  const $ = (sel) => document.querySelector(sel);

  function fmtNum(value, digits) {
    return typeof value === "number" && isFinite(value) ? value.toFixed(digits === undefined ? 2 : digits) : T("common.none");
  }

  function fmtTime(iso) {
    if (!iso) return T("common.none");
    const d = new Date(iso);
    if (isNaN(d.getTime())) return String(iso);
    try {
      return d.toLocaleString(locale());
    } catch (e) {
      return d.toISOString();
    }
  }

  function typeLabel(type) {
    return MEMORY_TYPES.includes(type) ? T("types." + type) : String(type);
  }

  function statusLabel(status) {
    return ["active", "shadow", "disabled", "expired", "superseded"].includes(status) ? T("status." + status) : String(status);
  }

  /** A stored enum value (a method, a source type, a role, an action) in the page's language; unknown ones as they are. */
  function enumLabel(group, value) {
    const key = group + "." + value;
    return FALLBACK_EN[key] !== undefined ? T(key) : String(value);
  }

  function auditActionLabel(action) {
    return enumLabel("audit.actions", action);
  }

  function scopeLabel(scope, scopeId) {
    const kind = scope === "user" || scope === "group" ? T("scope." + scope) : String(scope);
    return kind + " · " + String(scopeId);
  }

  /** A scope that opens its per-user view (user.js) when clicked; plain text without that view. */
  function scopeLink(scope, scopeId) {
    const open = window.LTM && window.LTM.openUser;
    if (!open) return scopeLabel(scope, scopeId);
    const id = scope + ":" + scopeId;
    return h("button", { type: "button", class: "linkish", "data-testid": "scope-link", "data-scope": id, title: T("user.open"),
      onclick: (e) => { e.stopPropagation(); open(id); },
      onkeydown: (e) => { e.stopPropagation(); } }, scopeLabel(scope, scopeId));
  }

  function ttlLabel(days) {
    return days === null || days === undefined ? T("common.permanent") : T("common.days", { n: days });
  }

  function bar(value) {
    const pct = Math.max(0, Math.min(1, Number(value) || 0)) * 100;
    return h("span", { class: "bar", "aria-hidden": "true" }, h("span", { style: "width:" + pct.toFixed(0) + "%" }));
  }

  function eventText(event) {
    const content = event && event.content;
    if (content && typeof content.text === "string") return content.text;
    try {
      return JSON.stringify(content, null, 2);
    } catch (e) {
      return String(content);
    }
  }

  // -- notices, toasts, dialog -------------------------------------------------

  function toast(message, kind) {
    const el = h("div", { class: "toast " + (kind || "ok"), "data-testid": "toast", "data-kind": kind || "ok" }, message);
    $("#toasts").appendChild(el);
    setTimeout(() => el.remove(), kind === "error" ? 9000 : 4500);
  }

  function errorMessage(err) {
    return (err && err.message) || String(err);
  }

  function fail(err) {
    toast(T("common.error", { message: errorMessage(err) }), "error");
  }

  function notice(message) {
    const el = $("#notice");
    el.textContent = message || "";
    el.hidden = !message;
  }

  let modalClose = null;

  /** A dialog with a title, body nodes and buttons [{label, kind, testid, run}]. */
  function openModal(title, body, buttons, opts) {
    $("#modal-title").textContent = title;
    $("#modal-body").replaceChildren(...(Array.isArray(body) ? body : [body]).flat(Infinity).filter(Boolean));
    const actions = $("#modal-actions");
    actions.replaceChildren();
    (buttons || []).forEach((b) => {
      const btn = h("button", {
        type: "button",
        class: "btn " + (b.kind || "ghost") + (b.write ? " write" : ""),
        "data-testid": b.testid || null,
        disabled: b.write && state.readOnly ? true : null,
        title: b.write && state.readOnly ? T("common.readonly_blocked") : null,
      }, b.label);
      btn.addEventListener("click", async () => {
        if (!b.run) return closeModal();
        btn.disabled = true;
        try {
          const keep = await b.run();
          if (!keep) closeModal();
          else btn.disabled = false;
        } catch (err) {
          fail(err);
          btn.disabled = false;
        }
      });
      actions.appendChild(btn);
    });
    modalClose = (opts && opts.onClose) || null;
    $("#modal").hidden = false;
    const focus = actions.querySelector("button:not(:disabled)") || $("#modal-close");
    if (focus) focus.focus();
  }

  function closeModal() {
    $("#modal").hidden = true;
    $("#modal-body").replaceChildren();
    const done = modalClose;
    modalClose = null;
    if (done) done();
  }

  function confirmModal(title, text, label, kind) {
    return new Promise((resolve) => {
      let answered = false;
      openModal(title, h("p", null, text), [
        { label: T("common.cancel"), testid: "modal-cancel", run: () => { answered = true; resolve(false); } },
        { label: label, kind: kind || "danger", testid: "modal-confirm", run: () => { answered = true; resolve(true); } },
      ], { onClose: () => { if (!answered) resolve(false); } });
    });
  }

  // -- the API through the dashboard bridge ------------------------------------

  function cleanParams(params) {
    const out = {};
    Object.entries(params || {}).forEach(([k, v]) => {
      if (v !== null && v !== undefined && String(v).trim() !== "") out[k] = String(v).trim();
    });
    return out;
  }

  function apiGet(endpoint, params) {
    if (!bridge) return Promise.reject(new Error(T("common.no_bridge")));
    return bridge.apiGet(endpoint, Object.assign(cleanParams(params), { lang: lang() }));
  }

  function uploadFile(endpoint, file, extra) {
    if (!bridge) return Promise.reject(new Error(T("common.no_bridge")));
    // The file as JSON in the body: for dashboards whose page bridge cannot
    // upload (AstrBot before 4.29 answers "Network Error"). Checksums are over
    // the values, so parsing and sending them again changes nothing.
    const asJson = () => file.text().then((text) => apiPost(endpoint, Object.assign({ export: JSON.parse(text) }, extra || {})));
    // Extra fields (an import for review's status) go with the JSON body.
    if (typeof bridge.upload !== "function" || extra) return asJson();
    return bridge.upload(endpoint, file).catch((err) =>
      /network error/i.test(String((err && err.message) || err)) ? asJson() : Promise.reject(err));
  }

  function apiPost(endpoint, body) {
    if (!bridge) return Promise.reject(new Error(T("common.no_bridge")));
    // The page's language rides along, so messages and reasons come back in it.
    const payload = body && typeof body === "object" && !Array.isArray(body) ? body : {};
    return bridge.apiPost(endpoint, Object.assign({ lang: lang() }, payload));
  }

  // -- state ---------------------------------------------------------------------

  const state = {
    tab: "review",
    readOnly: null,
    policy: null,
    stats: null,
    queue: { filter: "shadow", type: "", page: 1, pageSize: 25, items: [], total: 0, selected: new Set() },
    search: { params: { sort: "updated", page_size: "25" }, page: 1, items: [], total: 0, pageSize: 25 },
    audit: { params: {}, page: 1, pageSize: 50 },
    importFile: null,
    importName: "",
  };

  // -- status: banner and summary ------------------------------------------------

  async function refreshStatus() {
    const [policy, stats] = await Promise.all([apiGet("policy"), apiGet("stats")]);
    state.policy = policy;
    state.stats = stats;
    state.readOnly = !!policy.emergency_read_only;
    renderBanner();
    renderSummary();
  }

  function renderBanner() {
    const banner = $("#readonly-banner");
    const toggle = $("#readonly-toggle");
    if (state.readOnly === null) {
      banner.setAttribute("data-state", "unknown");
      $("#readonly-title").textContent = T("ro.unknown");
      $("#readonly-text").textContent = "";
      toggle.disabled = true;
      return;
    }
    const changed = banner.getAttribute("data-state") !== (state.readOnly ? "on" : "off");
    banner.setAttribute("data-state", state.readOnly ? "on" : "off");
    $("#readonly-title").textContent = state.readOnly ? T("ro.on_title") : T("ro.off_title");
    $("#readonly-text").textContent = state.readOnly ? T("ro.on_text") : T("ro.off_text");
    toggle.checked = state.readOnly;
    toggle.disabled = false;
    toggle.setAttribute("aria-checked", String(state.readOnly));
    document.body.classList.toggle("read-only", state.readOnly);
    document.querySelectorAll(".btn.write").forEach((btn) => {
      if (state.readOnly) {
        btn.setAttribute("title", T("common.readonly_blocked"));
      } else {
        btn.removeAttribute("title");
      }
    });
    updateBulkBar();
    if (changed && state.queue.items.length) renderQueue(); // enable or disable the write buttons
    const confirmBtn = $("#import-confirm");
    if (confirmBtn) confirmBtn.disabled = state.readOnly;
    const save = $("#policy-save");
    if (save) save.disabled = false; // policy saves (incl. turning read-only off) stay possible
  }

  function renderSummary() {
    const s = state.stats;
    const box = $("#summary");
    if (!s) return box.replaceChildren();
    const pill = (label, value, testid) =>
      h("span", { class: "pill", "data-testid": testid }, label, h("b", null, value));
    const pills = [
      pill(T("summary.mode"), s.mode, "summary-mode"),
      pill(T("summary.queue"), s.totals.shadow, "summary-shadow"),
      pill(T("summary.pending"), s.totals.awaiting_approval, "summary-pending"),
      pill(T("summary.total"), s.totals.items, "summary-total"),
    ];
    if (s.totals.failed_events) pills.push(pill(T("summary.failed"), s.totals.failed_events, "summary-failed"));
    box.replaceChildren(...pills);
    // Search by meaning needs an embedding provider: offered only with one.
    const meaning = !!(s.providers && s.providers.embedding);
    $("#search-meaning-box").hidden = !meaning;
    if (!meaning) $("#search-meaning").checked = false;
    const badge = h("span", { class: "badge", "data-testid": "queue-badge" }, String(s.totals.shadow));
    const tab = $("#tab-review");
    tab.replaceChildren(T("tabs.review"), badge);
  }

  async function onReadOnlyToggle(event) {
    const toggle = event.target;
    const want = toggle.checked;
    toggle.checked = !want; // unchanged until confirmed and saved
    const ok = await confirmModal(
      want ? T("ro.confirm_on_title") : T("ro.confirm_off_title"),
      want ? T("ro.confirm_on") : T("ro.confirm_off"),
      want ? T("ro.turn_on") : T("ro.turn_off"),
      want ? "danger" : "primary",
    );
    if (!ok) return;
    try {
      const policy = await apiPost("policy", { emergency_read_only: want, source: "page" });
      state.policy = policy;
      state.readOnly = !!policy.emergency_read_only;
      renderBanner();
      toast(state.readOnly ? T("ro.turned_on") : T("ro.turned_off"));
      await refreshStatus();
      if (state.tab === "policy") fillPolicyForm(state.policy);
    } catch (err) {
      fail(err);
    }
  }

  // -- tabs ----------------------------------------------------------------------

  function showTab(name) {
    state.tab = name;
    document.querySelectorAll(".tab").forEach((tab) => {
      tab.setAttribute("aria-selected", String(tab.getAttribute("data-tab") === name));
    });
    document.querySelectorAll("[data-panel]").forEach((panel) => {
      panel.hidden = panel.getAttribute("data-panel") !== name;
    });
    return loadTab(name);
  }

  // Tabs drawn by the other scripts (preview.js, user.js): name → loader.
  const panelLoaders = {};
  const rerenderHooks = [];

  function loadTab(name) {
    if (panelLoaders[name]) return panelLoaders[name]().catch(fail);
    const loaders = {
      review: loadQueue,
      memories: loadSearch,
      stats: () => refreshStatus().then(renderStats),
      policy: () => apiGet("policy").then((p) => { state.policy = p; fillPolicyForm(p); }),
      transfer: () => Promise.resolve(),
      audit: loadAudit,
    };
    // Tabs of policy.js, drift.js and replay.js load themselves on their own clicks.
    return (loaders[name] || (() => Promise.resolve()))().catch(fail);
  }

  // -- tables and pager ---------------------------------------------------------------

  /** A table body's rows; none: one muted row saying ``emptyText`` across every column of the header. */
  function fillRows(body, rows, emptyText, emptyAttrs) {
    if (rows.length) {
      body.replaceChildren(...rows);
      return;
    }
    const columns = body.closest("table").querySelectorAll("thead th").length || 1;
    body.replaceChildren(h("tr", null, h("td", { colspan: String(columns), class: "muted", ...emptyAttrs }, emptyText)));
  }


  /** A whole table: ``headers`` [text | {text, class}], ``rows`` <tr> nodes, ``emptyText`` when none. */
  function table(headers, rows, emptyText, attrs) {
    const head = h("tr", null, headers.map((c) => typeof c === "string" ? h("th", null, c) : h("th", { class: c.class || null }, c.text)));
    const body = h("tbody");
    const tbl = h("table", Object.assign({ class: "table" }, attrs || {}), h("thead", null, head), body);
    fillRows(body, rows, emptyText);
    return h("div", { class: "table-wrap" }, tbl);
  }

  function renderPager(box, page, pageSize, total, go, testid) {
    const pages = Math.max(1, Math.ceil(total / pageSize));
    box.replaceChildren(
      h("span", { "data-testid": testid + "-info" }, T("common.page", { page: page, pages: pages, total: total })),
      h("button", { type: "button", class: "btn small", disabled: page <= 1, "data-testid": testid + "-prev", onclick: () => go(page - 1) }, T("common.prev")),
      h("button", { type: "button", class: "btn small", disabled: page >= pages, "data-testid": testid + "-next", onclick: () => go(page + 1) }, T("common.next")),
    );
  }

  // -- (a) review queue ---------------------------------------------------------------

  async function loadQueue() {
    const q = state.queue;
    const data = await apiGet("items", {
      status: q.filter, type: q.type, page: q.page, page_size: q.pageSize, sort: "updated",
    });
    if (!data.items.length && q.page > 1 && data.total > 0) {
      q.page = Math.max(1, Math.ceil(data.total / q.pageSize));
      return loadQueue();
    }
    q.items = data.items;
    q.total = data.total;
    const ids = new Set(q.items.map((i) => i.memory_id));
    q.selected.forEach((id) => { if (!ids.has(id)) q.selected.delete(id); });
    renderQueue();
  }

  function renderQueue() {
    const q = state.queue;
    const list = $("#queue-list");
    $("#queue-count").textContent = T("queue.count", { total: q.total });
    if (!q.items.length) {
      list.replaceChildren(h("div", { class: "empty", "data-testid": "queue-empty" }, T("queue.empty")));
    } else {
      list.replaceChildren(...q.items.map(queueCard));
    }
    renderPager($("#queue-pager"), q.page, q.pageSize, q.total, (p) => { q.page = p; loadQueue().catch(fail); }, "queue-pager");
    updateBulkBar();
  }

  function queueCard(item) {
    const q = state.queue;
    const selected = q.selected.has(item.memory_id);
    const ro = !!state.readOnly;
    const blocked = ro ? T("common.readonly_blocked") : null;
    const check = h("input", {
      type: "checkbox", checked: selected, "data-testid": "select", "aria-label": T("queue.select"),
      onchange: (e) => {
        if (e.target.checked) q.selected.add(item.memory_id);
        else q.selected.delete(item.memory_id);
        card.classList.toggle("selected", e.target.checked);
        updateBulkBar();
      },
    });
    const card = h("article", {
      class: "qcard" + (selected ? " selected" : ""),
      "data-testid": "queue-item",
      "data-memory-id": item.memory_id,
      "data-status": item.status,
    },
      h("div", { class: "qcheck" }, check),
      h("div", null,
        h("div", { class: "qfact", "data-testid": "fact" }, item.fact),
        item.held_reason
          ? h("div", { class: "qreason", "data-testid": "held-reason" }, T("fields.held_reason") + ": " + item.held_reason)
          : null,
        h("div", { class: "qmeta" },
          h("span", { class: "tag" }, typeLabel(item.type)),
          item.awaiting_approval
            ? h("span", { class: "tag pending", "data-testid": "awaiting" }, T("queue.awaiting"))
            : h("span", { class: "tag status-" + item.status }, statusLabel(item.status)),
          h("span", null, scopeLabel(item.scope, item.scope_id)),
          h("span", null, T("fields.confidence") + " ", bar(item.confidence), fmtNum(item.confidence)),
          h("span", null, T("fields.importance") + " " + fmtNum(item.importance)),
          h("span", null, T("fields.evidence_count") + " " + item.evidence_count),
          h("span", null, fmtTime(item.updated_at)),
        ),
      ),
      h("div", { class: "qactions" },
        h("button", { type: "button", class: "btn success small write", "data-testid": "approve", disabled: ro, title: blocked,
          onclick: () => review([item.memory_id], "approve").catch(fail) }, T("queue.approve")),
        h("button", { type: "button", class: "btn danger small write", "data-testid": "reject", disabled: ro, title: blocked,
          onclick: () => confirmReject([item.memory_id]) }, T("queue.reject")),
        h("button", { type: "button", class: "btn small write", "data-testid": "edit", disabled: ro, title: blocked,
          onclick: () => openEdit(item) }, T("queue.edit")),
        h("button", { type: "button", class: "btn ghost small", "data-testid": "details",
          onclick: () => openDetail(item.memory_id).catch(fail) }, T("queue.details")),
      ),
    );
    return card;
  }

  function updateBulkBar() {
    const q = state.queue;
    const n = q.selected.size;
    $("#bulk-count").textContent = T("queue.selected", { n: n });
    $("#bulk-bar").classList.toggle("has-selection", n > 0);
    $("#bulk-approve").disabled = n === 0 || !!state.readOnly;
    $("#bulk-reject").disabled = n === 0 || !!state.readOnly;
    $("#bulk-edit").disabled = n === 0 || !!state.readOnly;
    const all = $("#queue-select-all");
    const onPage = q.items.map((i) => i.memory_id);
    const chosen = onPage.filter((id) => q.selected.has(id)).length;
    all.checked = onPage.length > 0 && chosen === onPage.length;
    all.indeterminate = chosen > 0 && chosen < onPage.length;
    all.disabled = onPage.length === 0;
  }

  async function review(ids, decision) {
    const reason = $("#bulk-reason").value.trim();
    const body = { memory_ids: ids, decision: decision };
    if (reason && ids.length > 0) body.reason = reason;
    const data = await apiPost("items/review", body);
    const n = (data && data.reviewed ? data.reviewed.length : ids.length);
    ids.forEach((id) => state.queue.selected.delete(id));
    toast(decision === "approve" ? T("queue.approved", { n: n }) : T("queue.rejected", { n: n }));
    await Promise.all([loadQueue(), refreshStatus()]);
    if (state.tab === "memories") await loadSearch();
  }

  async function confirmReject(ids) {
    const ok = await confirmModal(T("queue.confirm_reject_title", { n: ids.length }), T("queue.confirm_reject"), T("queue.reject"), "danger");
    if (ok) await review(ids, "reject").catch(fail);
  }

  // -- edit and detail ----------------------------------------------------------------

  function typeSelect(value, withAny) {
    const sel = h("select", null);
    if (withAny) sel.appendChild(h("option", { value: "" }, T("common.any")));
    MEMORY_TYPES.forEach((t) => sel.appendChild(h("option", { value: t, selected: t === value }, typeLabel(t))));
    if (value !== undefined) sel.value = value;
    return sel;
  }

  function openEdit(item) {
    const fact = h("textarea", { "data-testid": "edit-fact", maxlength: "2000", rows: "3" });
    fact.value = item.fact;
    const importance = h("input", { type: "number", min: "0", max: "1", step: "0.05", "data-testid": "edit-importance" });
    importance.value = String(item.importance);
    const type = typeSelect(item.type, false);
    type.setAttribute("data-testid", "edit-type");
    const error = h("div", { class: "notice error", hidden: true, "data-testid": "edit-error" });
    const body = [
      h("label", { class: "field" }, h("span", null, T("fields.fact")), fact),
      h("div", { class: "edit-grid" },
        h("label", { class: "field" }, h("span", null, T("fields.importance") + " (" + T("edit.importance_hint") + ")"), importance),
        h("label", { class: "field" }, h("span", null, T("fields.type")), type),
      ),
      error,
    ];
    openModal(T("edit.title"), body, [
      { label: T("common.cancel"), testid: "edit-cancel" },
      {
        label: T("common.save"), kind: "primary", testid: "edit-save", write: true,
        run: async () => {
          const changes = {};
          const newFact = fact.value.replace(/\s+/g, " ").trim();
          if (newFact !== item.fact) changes.fact = fact.value;
          const imp = importance.value.trim() === "" ? importance.value : Number(importance.value);
          if (imp !== item.importance) changes.importance = imp;
          if (type.value !== item.type) changes.type = type.value;
          if (!Object.keys(changes).length) {
            toast(T("edit.nothing"));
            return false;
          }
          try {
            await apiPost("items/" + item.memory_id + "/update", changes);
          } catch (err) {
            error.textContent = errorMessage(err);
            error.hidden = false;
            return true; // keep the dialog open to fix the value
          }
          toast(T("detail.updated"));
          await afterChange();
          return false;
        },
      },
    ]);
    fact.focus();
  }

  function openBulkEdit(ids) {
    if (!ids.length) return;
    const importance = h("input", { type: "number", min: "0", max: "1", step: "0.05", "data-testid": "bulk-edit-importance",
      placeholder: T("edit.unchanged") });
    const type = h("select", { "data-testid": "bulk-edit-type" }, h("option", { value: "" }, T("edit.unchanged")),
      MEMORY_TYPES.map((t) => h("option", { value: t }, typeLabel(t))));
    const error = h("div", { class: "notice error", hidden: true, "data-testid": "bulk-edit-error" });
    openModal(T("edit.bulk_title", { n: ids.length }), [
      h("p", { class: "muted" }, T("edit.bulk_hint")),
      h("div", { class: "edit-grid" },
        h("label", { class: "field" }, h("span", null, T("fields.importance") + " (" + T("edit.importance_hint") + ")"), importance),
        h("label", { class: "field" }, h("span", null, T("fields.type")), type),
      ),
      error,
    ], [
      { label: T("common.cancel"), testid: "bulk-edit-cancel" },
      {
        label: T("common.save"), kind: "primary", testid: "bulk-edit-save", write: true,
        run: async () => {
          const changes = {};
          const raw = importance.value.trim();
          if (raw !== "") changes.importance = isFinite(Number(raw)) ? Number(raw) : raw;
          if (type.value) changes.type = type.value;
          if (!Object.keys(changes).length) {
            toast(T("edit.nothing"));
            return false;
          }
          // No bulk route: one validated, audited update per memory.
          let done = 0;
          const failed = [];
          for (const id of ids) {
            try {
              await apiPost("items/" + id + "/update", changes);
              done += 1;
            } catch (err) {
              failed.push(errorMessage(err));
            }
          }
          if (done) toast(T("edit.bulk_done", { n: done }));
          await afterChange();
          if (failed.length) {
            error.textContent = T("edit.bulk_failed", { n: failed.length, message: failed[0] });
            error.hidden = false;
            return true;
          }
          return false;
        },
      },
    ]);
  }

  async function afterChange() {
    const jobs = [refreshStatus()];
    if (state.tab === "review") jobs.push(loadQueue());
    if (state.tab === "memories") jobs.push(loadSearch());
    await Promise.all(jobs);
  }

  async function openDetail(memoryId) {
    const item = await apiGet("items/" + memoryId);
    const dl = h("dl", { class: "dl", "data-testid": "detail-fields" });
    const row = (label, value) => { dl.appendChild(h("dt", null, label)); dl.appendChild(h("dd", null, value)); };
    row(T("fields.fact"), h("strong", { "data-testid": "detail-fact" }, item.fact));
    row(T("fields.type"), typeLabel(item.type));
    row(T("fields.status"), item.awaiting_approval ? statusLabel(item.status) + " · " + T("queue.awaiting") : statusLabel(item.status));
    row(T("fields.scope"), scopeLabel(item.scope, item.scope_id));
    row(T("fields.confidence"), fmtNum(item.confidence));
    row(T("fields.importance"), fmtNum(item.importance));
    row(T("fields.evidence_count"), String(item.evidence_count));
    row(T("fields.ttl_days"), ttlLabel(item.ttl_days));
    row(T("fields.created_at"), fmtTime(item.created_at));
    row(T("fields.updated_at"), fmtTime(item.updated_at));
    row(T("fields.uses"), h("span", { "data-testid": "detail-uses" }, String(item.use_count) + " (" +
      T("fields.uses_detail", { injected: item.injected_count, tool: item.tool_count }) + ")"));
    row(T("fields.last_used_at"), h("span", { "data-testid": "detail-last-used" },
      item.last_used_at ? fmtTime(item.last_used_at) : T("fields.never_used")));
    if (item.held_reason) row(T("fields.held_reason"), h("span", { "data-testid": "detail-held-reason" }, item.held_reason));
    if (item.valid_from) row(T("fields.valid_from"), fmtTime(item.valid_from));
    if (item.valid_to) row(T("fields.valid_to"), fmtTime(item.valid_to));
    row(T("fields.fact_key"), item.fact_key);
    row(T("fields.memory_id"), item.memory_id);

    const evidence = (item.evidence || []).map((ev) => {
      const event = ev.event;
      return h("div", { class: "evidence", "data-testid": "evidence", "data-event-id": ev.event_id },
        h("div", { class: "ev-head" },
          h("span", null, T("detail.method") + ": " + enumLabel("evidence.method", ev.extraction_method)),
          event ? h("span", null, T("detail.source") + ": " + enumLabel("evidence.source", event.source_type) + " / " +
            enumLabel("evidence.role", event.source_role)) : null,
          event ? h("span", null, T("detail.sender") + ": " + (event.sender_name || "") + (event.sender_id ? " (" + event.sender_id + ")" : "")) : null,
          event && event.session_id ? h("span", null, T("detail.session") + ": " + event.session_id) : null,
          h("span", null, fmtTime(event ? event.created_at : ev.created_at)),
        ),
        event
          ? h("div", { class: "ev-text", "data-testid": "evidence-text" }, eventText(event))
          : h("div", { class: "muted" }, T("detail.event_missing")),
      );
    });
    const history = (item.history || []).map((v) =>
      h("li", { "data-testid": "history-value", "data-memory-id": v.memory_id,
                class: v.memory_id === item.memory_id ? "this" : "" },
        h("span", { class: "history-fact" }, v.fact),
        h("span", { class: "muted" }, " · " + fmtTime(v.valid_from || v.created_at) + " → " +
          (v.valid_to ? fmtTime(v.valid_to) : T("detail.current")) + " · " + statusLabel(v.status))));
    const superseded = item.status === "superseded";
    const body = [
      superseded ? h("p", { class: "muted", "data-testid": "detail-is-history" }, T("detail.is_history")) : null,
      dl,
      history.length ? h("h3", null, T("detail.history")) : null,
      history.length ? h("ol", { class: "history", "data-testid": "detail-history" }, history) : null,
      h("h3", null, T("detail.evidence")),
      evidence.length ? evidence : h("p", { class: "muted" }, T("detail.no_evidence")),
    ].filter(Boolean);
    const buttons = [];
    if (item.status === "shadow") {
      buttons.push({ label: T("queue.approve"), kind: "success", testid: "detail-approve", write: true,
        run: () => review([item.memory_id], "approve") });
    }
    // A superseded value is history: read or deleted, never edited or switched on.
    if (!superseded) buttons.push({ label: T("queue.edit"), testid: "detail-edit", write: true, run: () => { closeModal(); openEdit(item); return true; } });
    const disable = item.status === "disabled";
    if (!superseded) buttons.push({
      label: disable ? T("detail.enable") : T("detail.disable"), testid: "detail-toggle", write: true,
      run: async () => {
        await apiPost("items/" + item.memory_id + "/update", { status: disable ? "active" : "disabled" });
        toast(T("detail.updated"));
        await afterChange();
      },
    });
    buttons.push({
      label: T("detail.delete"), kind: "danger", testid: "detail-delete", write: true,
      run: async () => {
        closeModal();
        const ok = await confirmModal(T("detail.confirm_delete_title"), T("detail.confirm_delete"), T("detail.delete"), "danger");
        if (!ok) return true;
        await apiPost("items/" + item.memory_id + "/delete", {}).then(() => toast(T("detail.deleted"))).catch(fail);
        await afterChange();
        return true;
      },
    });
    buttons.push({ label: T("common.close"), testid: "detail-close" });
    openModal(T("detail.title"), body, buttons);
  }

  // -- (b) search over every memory ----------------------------------------------------

  function readForm(form) {
    const out = {};
    new FormData(form).forEach((value, key) => { out[key] = String(value); });
    return out;
  }

  async function loadSearch() {
    const s = state.search;
    const params = Object.assign({}, s.params, { page: s.page });
    s.pageSize = Number(params.page_size) || 25;
    const data = await apiGet("items", params);
    s.items = data.items;
    s.total = data.total;
    renderSearch();
  }

  // How often a memory was used, and when last: never-used ones are candidates for clean-up.
  function usesTitle(item) {
    return T("fields.uses_detail", { injected: item.injected_count, tool: item.tool_count }) + " · " + T("fields.last_used_at") +
      ": " + (item.last_used_at ? fmtTime(item.last_used_at) : T("fields.never_used"));
  }

  function renderSearch() {
    const s = state.search;
    fillRows($("#memory-rows"), s.items.map((item) => h("tr", {
      class: "clickable", tabindex: "0", "data-testid": "memory-row", "data-memory-id": item.memory_id,
      onclick: () => openDetail(item.memory_id).catch(fail),
      onkeydown: (e) => { if (e.key === "Enter") openDetail(item.memory_id).catch(fail); },
    },
      h("td", { class: "fact" }, item.fact),
      h("td", null, typeLabel(item.type)),
      h("td", null, item.awaiting_approval
        ? h("span", { class: "tag pending" }, T("queue.awaiting"))
        : h("span", { class: "tag status-" + item.status }, statusLabel(item.status))),
      h("td", null, scopeLink(item.scope, item.scope_id)),
      h("td", { class: "num" }, bar(item.confidence), fmtNum(item.confidence)),
      h("td", { class: "num" }, fmtNum(item.importance)),
      h("td", { class: "num" }, String(item.evidence_count)),
      h("td", { class: "num", "data-testid": "memory-uses", title: usesTitle(item) }, String(item.use_count)),
      h("td", null, fmtTime(item.updated_at)),
    )), T("search.empty"), { "data-testid": "search-empty" });
    renderPager($("#memory-pager"), s.page, s.pageSize, s.total, (p) => { s.page = p; loadSearch().catch(fail); }, "memory-pager");
  }

  // -- (c) statistics ------------------------------------------------------------------

  function renderStats() {
    const s = state.stats;
    if (!s) return;
    const card = (label, value, alert, testid) =>
      h("div", { class: "stat" + (alert ? " alert" : ""), "data-testid": testid },
        h("div", { class: "value" }, String(value)), h("div", { class: "label" }, label));
    const t = s.totals;
    $("#stat-cards").replaceChildren(
      card(T("stats.items"), t.items, false, "stat-items"),
      card(T("stats.shadow"), t.shadow, false, "stat-shadow"),
      card(T("stats.awaiting"), t.awaiting_approval, false, "stat-awaiting"),
      card(T("stats.pending_events"), t.pending_events, false, "stat-pending-events"),
      card(T("stats.failed_events"), t.failed_events, t.failed_events > 0, "stat-failed-events"),
      card(T("stats.writes_last_hour"), t.writes_last_hour, false, "stat-writes"),
      card(T("stats.dropped_ro"), s.events_not_recorded_read_only, s.events_not_recorded_read_only > 0, "stat-dropped"),
    );
    // What limits memory right now (a missing package, no provider), in the server's words.
    const notices = s.notices || [];
    const box = $("#stats-notices");
    box.replaceChildren(h("strong", null, T("stats.notices")),
      h("ul", null, notices.map((n) => h("li", { "data-testid": "stats-notice", "data-code": n.code }, n.message))));
    box.hidden = notices.length === 0;
    const counts = (obj, label) => h("div", { class: "kv" },
      Object.entries(obj || {}).map(([k, n]) => h("span", { class: "tag" }, label(k) + " " + n)));
    const rows = (s.scopes || []).map((sc) => h("tr", { "data-testid": "stats-row", "data-scope": sc.scope, "data-scope-id": sc.scope_id },
      h("td", null, scopeLink(sc.scope, sc.scope_id)),
      h("td", null, counts(sc.by_status, statusLabel)),
      h("td", null, counts(sc.by_type, typeLabel)),
      h("td", { class: "num" }, String(sc.awaiting_approval)),
      h("td", { class: "num" }, String(sc.writes_last_hour)),
      h("td", null, h("div", { class: "kv" },
        h("span", { class: "tag" }, T("stats.ev_pending", { n: sc.events.pending })),
        h("span", { class: "tag" }, T("stats.ev_done", { n: sc.events.done })),
        sc.events.failed ? h("span", { class: "tag pending" }, T("stats.ev_failed", { n: sc.events.failed })) : null,
        sc.events.skipped ? h("span", { class: "tag" }, T("stats.ev_skipped", { n: sc.events.skipped })) : null)),
      h("td", null, h("button", { type: "button", class: "btn small", "data-testid": "stats-show",
        onclick: () => showScope(sc.scope, sc.scope_id) }, T("stats.show"))),
    ));
    fillRows($("#stats-rows"), rows, T("stats.empty"), { "data-testid": "stats-empty" });
  }

  function showScope(scope, scopeId) {
    const form = $("#search-form");
    form.reset();
    $("#search-scope").value = scope;
    $("#search-scope-id").value = scopeId;
    state.search.params = readForm(form);
    state.search.page = 1;
    showTab("memories");
  }

  // -- (d) policy ----------------------------------------------------------------------

  function fillPolicyForm(policy) {
    const form = $("#policy-form");
    form.querySelectorAll("[name]").forEach((input) => {
      const value = byPath(policy, input.name);
      if (input.type === "checkbox") input.checked = !!value;
      else input.value = value === undefined || value === null ? "" : String(value);
    });
    form.querySelectorAll(".type-checks").forEach((box) => {
      const chosen = byPath(policy, box.getAttribute("data-name")) || [];
      box.querySelectorAll("input").forEach((input) => { input.checked = chosen.includes(input.value); });
    });
    const warnings = policy.config_warnings || [];
    const warnBox = $("#policy-warnings");
    warnBox.replaceChildren(h("strong", null, T("policy.warnings")), h("ul", null, warnings.map((w) => h("li", null, w))));
    warnBox.hidden = warnings.length === 0;
    $("#policy-error").hidden = true;
  }

  function collectPolicy() {
    const form = $("#policy-form");
    const body = { write_policy: {}, read_policy: {} };
    const put = (path, value) => {
      const parts = path.split(".");
      if (parts.length === 1) body[parts[0]] = value;
      else body[parts[0]][parts[1]] = value;
    };
    form.querySelectorAll("[name]").forEach((input) => {
      if (input.type === "checkbox") return put(input.name, input.checked);
      const kind = input.getAttribute("data-kind");
      if (kind) {
        const raw = input.value.trim();
        // Unparseable numbers go as typed: the server names the bad field.
        return put(input.name, raw !== "" && isFinite(Number(raw)) ? Number(raw) : raw);
      }
      put(input.name, input.value);
    });
    form.querySelectorAll(".type-checks").forEach((box) => {
      put(box.getAttribute("data-name"), Array.from(box.querySelectorAll("input:checked")).map((i) => i.value));
    });
    return body;
  }

  async function savePolicy(event) {
    event.preventDefault();
    const errorBox = $("#policy-error");
    errorBox.hidden = true;
    const save = $("#policy-save");
    save.disabled = true;
    try {
      const policy = await apiPost("policy", Object.assign(collectPolicy(), { source: "page" }));
      state.policy = policy;
      fillPolicyForm(policy);
      toast(T("policy.saved"));
      await refreshStatus();
    } catch (err) {
      errorBox.textContent = errorMessage(err);
      errorBox.hidden = false;
      errorBox.scrollIntoView({ block: "nearest" });
    } finally {
      save.disabled = false;
    }
  }

  // -- (e) export and import ------------------------------------------------------------

  async function downloadExport(event) {
    event.preventDefault();
    const params = cleanParams(readForm($("#export-form")));
    try {
      // The answer is the file itself; its name (ltm-export-<date>.json) comes
      // from the server's Content-Disposition.
      await bridge.download("export", params);
      toast(T("transfer.downloaded"));
    } catch (err) {
      fail(err);
    }
  }

  function resetImport() {
    state.importFile = null;
    state.importName = "";
    $("#import-preview").hidden = true;
    $("#import-status").textContent = "";
    $("#import-file").value = "";
  }

  async function onImportFile(event) {
    const file = event.target.files && event.target.files[0];
    $("#import-result").hidden = true;
    $("#import-preview").hidden = true;
    state.importFile = null;
    if (!file) return;
    const status = $("#import-status");
    if (file.size > MAX_IMPORT_BYTES) {
      status.textContent = T("transfer.too_big");
      return;
    }
    status.textContent = T("transfer.reading", { name: file.name });
    // The file goes up as it is (never parsed and re-sent here), so what
    // the server checks is exactly what was exported.
    try {
      const report = await uploadFile("import/preview", file, importExtra());
      state.importFile = file;
      state.importName = file.name;
      status.textContent = report.read_only ? file.name + " — " + T("transfer.read_only") : file.name;
      renderImportReport(report, true);
    } catch (err) {
      status.textContent = T("common.error", { message: errorMessage(err) });
    }
  }

  /** "Import for review": every imported memory arrives as shadow, for the review queue. */
  function importExtra() {
    return $("#import-for-review").checked ? { status: "shadow" } : null;
  }

  const IMPORT_MARKS = { add: "+", merge: "⇄", skip: "·" };

  /** One memory of an import report: {memory_id, fact, action, status, awaiting_approval, reason}. */
  function importLine(entry) {
    const status = entry.action === "skip" && entry.status === "deleted" ? null : entry.status;
    return h("li", { "data-testid": "import-line", "data-action": entry.action, "data-memory-id": entry.memory_id,
      title: entry.memory_id, class: entry.action === "skip" ? "muted" : null },
      (IMPORT_MARKS[entry.action] || "·") + " ", h("span", { class: "import-fact" }, entry.fact),
      status ? h("span", { class: "tag status-" + status, "data-testid": "import-line-status", "data-status": status },
        entry.awaiting_approval ? statusLabel(status) + " · " + T("queue.awaiting") : statusLabel(status)) : null,
      entry.reason ? h("span", { class: "muted" }, " " + entry.reason) : null);
  }

  /** The ids of an older server's report, which lists no facts. */
  function importIds(details) {
    return [].concat(
      (details.added || []).map((id) => h("li", { "data-testid": "import-line" }, "+ " + id)),
      (details.merged || []).map((id) => h("li", { "data-testid": "import-line" }, "⇄ " + id)),
      (details.skipped || []).map((s) => h("li", { class: "muted", "data-testid": "import-line" }, "· " + s.memory_id + ": " + s.reason)));
  }

  function renderImportReport(report, preview) {
    const count = (cls, label, n) => h("div", { class: "count " + cls, "data-testid": "import-" + cls },
      h("b", null, String(n)), label);
    $("#import-counts").replaceChildren(
      count("added", T(preview ? "transfer.added" : "transfer.added_done"), report.added),
      count("merged", T(preview ? "transfer.merged" : "transfer.merged_done"), report.merged),
      count("skipped", T(preview ? "transfer.skipped" : "transfer.skipped_done"), report.skipped),
    );
    const list = h("ul", null, Array.isArray(report.memories) ? report.memories.map(importLine) : importIds(report.details || {}));
    // Which status the imported memories get, in the server's words; and what it warns about.
    const status = report.status_message ? h("p", { "data-testid": "import-status-note" }, report.status_message) : null;
    const warnings = (report.warnings || []).length
      ? h("div", { class: "notice warn", "data-testid": "import-warnings" },
        h("ul", null, report.warnings.map((w) => h("li", { "data-code": w.code }, w.message))))
      : null;
    $("#import-details").replaceChildren(...[status, warnings, list].filter(Boolean));
    $("#import-preview").hidden = false;
    const confirmBtn = $("#import-confirm");
    confirmBtn.disabled = !!state.readOnly || (report.added + report.merged === 0);
    confirmBtn.title = report.added + report.merged === 0 ? T("transfer.nothing") : "";
  }

  async function confirmImport() {
    if (!state.importFile) return;
    const button = $("#import-confirm");
    button.disabled = true;
    try {
      const report = await uploadFile("import", state.importFile, importExtra());
      const result = $("#import-result");
      result.textContent = T("transfer.done", {
        name: state.importName, added: report.added, merged: report.merged, skipped: report.skipped,
      }) + (report.status_message ? " " + report.status_message : "");
      result.hidden = false;
      resetImport();
      await refreshStatus();
    } catch (err) {
      fail(err);
      button.disabled = false;
    }
  }

  // -- audit ---------------------------------------------------------------------------

  async function loadAudit() {
    const a = state.audit;
    const data = await apiGet("audit", Object.assign({}, a.params, { page: a.page, page_size: a.pageSize }));
    const rows = data.entries.map((e) => h("tr", { "data-testid": "audit-row", "data-action": e.action },
      h("td", null, fmtTime(e.created_at)),
      h("td", null, h("span", { class: "tag", title: e.action }, auditActionLabel(e.action))),
      h("td", null, e.actor),
      h("td", null, e.scope ? scopeLink(e.scope, e.scope_id) : T("common.none")),
      h("td", null, e.reason || ""),
      h("td", { class: "detail" }, auditDetail(e)),
    ));
    fillRows($("#audit-rows"), rows, T("audit.empty"));
    renderPager($("#audit-pager"), a.page, a.pageSize, data.total, (p) => { a.page = p; loadAudit().catch(fail); }, "audit-pager");
  }

  // What an audit row's detail says, as fields a person reads; the raw JSON behind a toggle.
  const AUDIT_STATUS_FIELDS = ["status", "old", "new"];

  function shortValue(value) {
    if (value === null || value === undefined) return T("common.none");
    if (typeof value === "number") return Number.isInteger(value) ? String(value) : value.toFixed(2);
    if (typeof value === "boolean") return T(value ? "audit.yes" : "audit.no");
    if (typeof value === "string") return value;
    const text = JSON.stringify(value);
    return text.length > 120 ? text.slice(0, 117) + "…" : text;
  }

  function auditFieldLabel(key) {
    return enumLabel("audit.field", key);
  }

  function auditDetail(entry) {
    const detail = entry.detail || {};
    const lines = [];
    const line = (key, ...value) => lines.push(h("li", { "data-field": key },
      h("span", { class: "audit-key" }, auditFieldLabel(key) + ": "), ...value));
    const change = (path, from, to) => h("li", { class: "audit-change" },
      h("code", null, path), ": " + shortValue(from) + " → " + shortValue(to));
    for (const [key, value] of Object.entries(detail)) {
      if (value === null || value === undefined) continue;  // says nothing
      if (key === "changes" && Array.isArray(detail.diff)) continue;  // the diff says the same, path by path
      if (key === "diff" && Array.isArray(value)) {
        if (!value.length) continue;
        lines.push(h("li", { "data-field": key }, h("span", { class: "audit-key" }, auditFieldLabel(key) + ":"),
          h("ul", { class: "audit-diff", "data-testid": "audit-diff" }, value.map((c) => change(c.path, c.from, c.to)))));
      } else if (key === "changes" && value && typeof value === "object") {
        lines.push(h("li", { "data-field": key }, h("span", { class: "audit-key" }, auditFieldLabel(key) + ":"),
          h("ul", { class: "audit-diff" }, Object.entries(value).map(([k, v]) =>
            Array.isArray(v) && v.length === 2 ? change(k, v[0], v[1]) : h("li", null, h("code", null, k), ": " + shortValue(v))))));
      } else if (key === "snapshot" && value && typeof value === "object") {
        line("fact", h("q", { class: "audit-fact" }, String(value.fact || "")),
          value.status ? " · " + statusLabel(value.status) : "", value.type ? " · " + typeLabel(value.type) : "");
      } else if ((key === "fact" || key === "previous_fact") && typeof value === "string") {
        line(key, h("q", { class: "audit-fact" }, value));
      } else if (AUDIT_STATUS_FIELDS.includes(key) && typeof value === "string") {
        line(key, statusLabel(value));
      } else if (key === "type" && typeof value === "string") {
        line(key, typeLabel(value));
      } else if (key === "source" && typeof value === "string") {
        line(key, enumLabel("history.source", value));
      } else if (Array.isArray(value) && value.every((v) => v === null || typeof v !== "object")) {
        line(key, value.length <= 3 ? value.map(shortValue).join(", ") || T("common.none") : T("audit.count", { n: value.length }));
      } else {
        line(key, shortValue(value));
      }
    }
    const raw = h("details", { class: "audit-raw", "data-testid": "audit-raw" },
      h("summary", null, T("audit.raw")), h("pre", null, JSON.stringify(detail, null, 2)));
    return h("div", { class: "audit-detail", "data-testid": "audit-detail" },
      lines.length ? h("ul", { class: "audit-fields", "data-testid": "audit-fields" }, lines) : null, raw);
  }

  // -- wiring ----------------------------------------------------------------------------

  function fillTypeControls() {
    document.querySelectorAll("select.type-select").forEach((sel) => {
      const value = sel.value;
      sel.replaceChildren(h("option", { value: "" }, T("common.any")),
        ...MEMORY_TYPES.map((t) => h("option", { value: t }, typeLabel(t))));
      sel.value = value;
    });
    document.querySelectorAll(".type-checks").forEach((box) => {
      const chosen = new Set(Array.from(box.querySelectorAll("input:checked")).map((i) => i.value));
      box.replaceChildren(...MEMORY_TYPES.map((t) => h("label", { class: "check" },
        h("input", { type: "checkbox", value: t, checked: chosen.has(t), "data-testid": box.getAttribute("data-name") + "." + t }),
        h("span", null, typeLabel(t)))));
    });
  }

  function wire() {
    document.querySelectorAll(".tab").forEach((tab) => {
      tab.addEventListener("click", () => showTab(tab.getAttribute("data-tab")));
    });
    $("#refresh-all").addEventListener("click", () => Promise.all([refreshStatus(), loadTab(state.tab)]).catch(fail));
    $("#readonly-toggle").addEventListener("change", onReadOnlyToggle);
    $("#modal-close").addEventListener("click", closeModal);
    $("#modal").addEventListener("click", (e) => { if (e.target === $("#modal")) closeModal(); });
    document.addEventListener("keydown", (e) => { if (e.key === "Escape" && !$("#modal").hidden) closeModal(); });

    $("#queue-filter").addEventListener("change", (e) => {
      state.queue.filter = e.target.value;
      state.queue.page = 1;
      loadQueue().catch(fail);
    });
    $("#queue-type").addEventListener("change", (e) => {
      state.queue.type = e.target.value;
      state.queue.page = 1;
      loadQueue().catch(fail);
    });
    $("#queue-select-all").addEventListener("change", (e) => {
      state.queue.items.forEach((i) => {
        if (e.target.checked) state.queue.selected.add(i.memory_id);
        else state.queue.selected.delete(i.memory_id);
      });
      renderQueue();
    });
    $("#bulk-approve").addEventListener("click", () => review(Array.from(state.queue.selected), "approve").catch(fail));
    $("#bulk-reject").addEventListener("click", () => confirmReject(Array.from(state.queue.selected)));
    $("#bulk-edit").addEventListener("click", () => openBulkEdit(Array.from(state.queue.selected)));

    $("#search-form").addEventListener("submit", (e) => {
      e.preventDefault();
      state.search.params = readForm(e.target);
      state.search.page = 1;
      loadSearch().catch(fail);
    });
    $("#search-reset").addEventListener("click", () => {
      $("#search-form").reset();
      state.search.params = readForm($("#search-form"));
      state.search.page = 1;
      loadSearch().catch(fail);
    });

    $("#policy-form").addEventListener("submit", savePolicy);
    $("#policy-discard").addEventListener("click", () => loadTab("policy"));

    $("#export-form").addEventListener("submit", downloadExport);
    $("#import-file").addEventListener("change", onImportFile);
    $("#import-confirm").addEventListener("click", confirmImport);
    $("#import-cancel").addEventListener("click", resetImport);
    // The preview says which status the memories get: ask again when that choice changes.
    $("#import-for-review").addEventListener("change", () => {
      if (state.importFile) onImportFile({ target: { files: [state.importFile] } });
    });

    $("#audit-form").addEventListener("submit", (e) => {
      e.preventDefault();
      state.audit.params = readForm(e.target);
      state.audit.page = 1;
      loadAudit().catch(fail);
    });
  }

  function rerender() {
    applyI18n();
    rerenderHooks.forEach((hook) => hook());
    fillTypeControls();
    renderBanner();
    renderSummary();
    if (state.tab === "review") renderQueue();
    if (state.tab === "memories") renderSearch();
    if (state.tab === "stats") renderStats();
  }

  async function start() {
    const app = $("#app");
    wire();
    applyI18n();
    fillTypeControls();
    renderBanner();
    if (!bridge) {
      notice(T("common.no_bridge"));
      app.setAttribute("aria-busy", "false");
      app.setAttribute("data-ready", "error");
      return;
    }
    const timeout = new Promise((resolve) => setTimeout(resolve, 8000, null));
    const context = await Promise.race([bridge.ready(), timeout]);
    if (!context) notice(T("common.no_bridge"));
    let lastLocale = locale();
    bridge.onContext(() => {
      if (locale() !== lastLocale) {
        lastLocale = locale();
        rerender();
      }
    });
    applyI18n();
    fillTypeControls();
    rerenderHooks.forEach((hook) => hook());  // the other scripts' texts, now in the dashboard's language
    try {
      await refreshStatus();
      await showTab("review");
      app.setAttribute("data-ready", "1");
    } catch (err) {
      notice(T("common.error", { message: errorMessage(err) }));
      app.setAttribute("data-ready", "error");
    } finally {
      app.setAttribute("aria-busy", "false");
    }
  }

  window.LTM = {
    apiGet, apiPost, h, el: h, T, lang, toast, fail, errorMessage, confirmModal, openModal, closeModal, fmtTime, fmtNum,
    locale, refreshStatus, renderPager, fillRows, table, state, showTab, typeLabel, statusLabel, scopeLabel, bar,
    openDetail: (id) => openDetail(id).catch(fail), auditDetail, auditActionLabel, enumLabel,
    /** A tab of another script: its loader runs each time the tab is shown. */
    addTab: (name, loader) => { panelLoaders[name] = loader; },
    /** Run ``hook`` when the dashboard's language changes. */
    onLanguage: (hook) => { rerenderHooks.push(hook); },
    /** The per-user view (user.js sets it). */
    openUser: null,
  };
  // After every script of the page has run: the tabs of user.js and preview.js are there before the first load.
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
