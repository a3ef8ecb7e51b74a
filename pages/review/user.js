/* The per-user view of the review page (GET user?scope=…): one user's (or
 * group's) memories, recent events, pause state, write switch and audit
 * trail together. Opened from the "User" tab, or by clicking a scope in the
 * statistics, the memory list or the audit log (window.LTM.openUser).
 *
 * Lifting a pause is explicit: a dialog asks for a reason, then POST
 * pauses/lift (audited). The write switch is POST policy/writes, as on the
 * statistics rows. Everything goes through runtime.js's kit (window.LTM); text
 * only through text nodes.
 */
window.LTM.panel("user", (L) => {
  "use strict";
  const { h, T } = L;
  const panel = () => document.getElementById("panel-user");
  const view = { scope: "", data: null };

  /** "user:<id>" / "group:<id>" split at the first colon (ids have colons of their own). */
  function parts(scope) {
    const at = scope.indexOf(":");
    return at < 0 ? ["", scope] : [scope.slice(0, at), scope.slice(at + 1)];
  }

  /** Every scope the statistics know, for the picker. */
  function knownScopes() {
    const stats = L.state.stats;
    return ((stats && stats.scopes) || []).map((s) => s.scope + ":" + s.scope_id);
  }

  function picker() {
    const input = h("input", { type: "text", id: "user-scope", list: "user-scope-list", maxlength: "300",
      "data-testid": "user-scope", placeholder: T("user.scope_placeholder"), value: view.scope });
    const list = h("datalist", { id: "user-scope-list" }, knownScopes().map((s) => h("option", { value: s })));
    return h("form", { class: "filters", "data-testid": "user-form", autocomplete: "off",
      onsubmit: (e) => { e.preventDefault(); open(input.value.trim()); } },
      h("label", { class: "field grow" }, h("span", null, T("user.scope")), input, list),
      h("div", { class: "field actions" }, h("button", { type: "submit", class: "btn primary", "data-testid": "user-show" }, T("user.show"))));
  }

  function section(title, testid, ...body) {
    return h("section", { class: "user-section", "data-testid": testid }, h("h2", null, title), ...body);
  }

  function pauseCard(data) {
    const p = data.paused;
    if (!p) {
      return h("div", { class: "user-state", "data-testid": "user-pause", "data-paused": "0" },
        h("span", { class: "tag status-active" }, T("user.not_paused")));
    }
    return h("div", { class: "user-state paused", "data-testid": "user-pause", "data-paused": "1" },
      h("span", { class: "tag pending" }, T("user.paused")),
      h("span", null, T("user.paused_detail", { since: L.fmtTime(p.since), by: p.by || T("common.none") })),
      p.reason ? h("span", { class: "muted", "data-testid": "user-pause-reason" }, T("audit.reason") + ": " + p.reason) : null,
      h("button", { type: "button", class: "btn danger small write", "data-testid": "user-lift",
        disabled: !!L.state.readOnly, title: L.state.readOnly ? T("common.readonly_blocked") : null,
        onclick: () => liftPause(data.scope) }, T("user.lift")));
  }

  function writesCard(data) {
    const on = !data.writes_off;
    const label = h("span", { class: "switch-label", "data-testid": "user-writes-label" }, on ? T("user.writes_on") : T("user.writes_off"));
    const input = h("input", { type: "checkbox", role: "switch", checked: on, "data-testid": "user-writes-toggle",
      "aria-label": T("user.writes"),
      onchange: () => switchWrites(data.scope, input).catch((err) => { input.checked = !input.checked; L.fail(err); }) });
    return h("div", { class: "user-state", "data-testid": "user-writes" },
      h("label", { class: "switch" }, input,
        h("span", { class: "switch-track", "aria-hidden": "true" }, h("span", { class: "switch-thumb" })), label),
      h("span", { class: "muted small" }, T("user.writes_hint")));
  }

  function memoriesTable(memories) {
    const rows = (memories.items || []).map((item) => h("tr", {
      class: "clickable", tabindex: "0", "data-testid": "user-memory", "data-memory-id": item.memory_id,
      onclick: () => L.openDetail(item.memory_id),
      onkeydown: (e) => { if (e.key === "Enter") L.openDetail(item.memory_id); },
    },
      h("td", { class: "fact" }, item.fact),
      h("td", null, L.typeLabel(item.type)),
      h("td", null, h("span", { class: "tag status-" + item.status }, L.statusLabel(item.status))),
      h("td", { class: "num" }, L.fmtNum(item.confidence)),
      // Where it was said and which chats may recall it, in the reader's words (docs/privacy.md).
      h("td", { "data-testid": "user-memory-audience", "data-visibility": item.visibility || "" }, item.audience || ""),
      h("td", null, L.fmtTime(item.updated_at))));
    return L.table([T("fields.fact"), T("fields.type"), T("fields.status"), { text: T("fields.confidence"), class: "num" },
      T("fields.audience"), T("fields.updated_at")], rows, T("user.no_memories"), { "data-testid": "user-memories" });
  }

  function eventText(event) {
    const content = event.content;
    if (content && typeof content.text === "string") return content.text;
    return content === undefined || content === null ? "" : JSON.stringify(content);
  }

  function eventsTable(events) {
    // The short columns keep their words on one line; the text column takes the rest.
    const rows = events.map((ev) => h("tr", { "data-testid": "user-event", "data-event-id": ev.event_id },
      h("td", { class: "nowrap" }, L.fmtTime(ev.created_at)),
      h("td", { class: "nowrap", "data-testid": "user-event-role" }, L.enumLabel("evidence.role", ev.source_role)),
      h("td", { class: "fact" }, eventText(ev)),
      h("td", { class: "nowrap", "data-testid": "user-event-extraction" },
        ev.extraction_status ? L.enumLabel("user.extraction", ev.extraction_status) : T("common.none"))));
    return L.table([{ text: T("audit.time"), class: "nowrap" }, { text: T("user.role"), class: "nowrap" }, T("user.text"),
      { text: T("user.extraction_head"), class: "nowrap" }], rows, T("user.no_events"), { "data-testid": "user-events" });
  }

  function auditTable(entries) {
    const rows = entries.map((e) => h("tr", { "data-testid": "user-audit-row", "data-action": e.action },
      h("td", null, L.fmtTime(e.created_at)),
      h("td", null, h("span", { class: "tag", title: e.action }, L.auditActionLabel(e.action))),
      h("td", null, e.actor),
      h("td", null, e.reason || ""),
      h("td", { class: "detail" }, L.auditDetail(e))));
    return L.table([T("audit.time"), T("audit.action"), T("audit.actor"), T("audit.reason"), T("audit.detail")], rows,
      T("audit.empty"), { "data-testid": "user-audit" });
  }

  function render() {
    const box = panel();
    const body = [h("p", { class: "muted" }, T("user.intro")), picker()];
    const data = view.data;
    if (data) {
      const [kind, id] = parts(data.scope);
      const memories = data.memories || { items: [], total: 0 };
      body.push(
        h("h2", { class: "user-title", "data-testid": "user-title", "data-scope": data.scope }, L.scopeLabel(kind, id)),
        h("div", { class: "user-states" }, pauseCard(data), writesCard(data)),
        section(T("user.memories", { n: memories.total }), "user-memories-section", memoriesTable(memories)),
        section(T("user.events"), "user-events-section", eventsTable(data.events || [])),
        section(T("user.audit"), "user-audit-section", auditTable(data.audit || [])));
    }
    box.replaceChildren(...body);
    box.setAttribute("data-loaded", data ? "1" : "0");
  }

  async function load() {
    if (view.scope) {
      try {
        view.data = await L.apiGet("user", { scope: view.scope });
      } catch (err) {
        view.data = null;
        render();
        panel().appendChild(h("div", { class: "notice error", "data-testid": "user-error" }, T("common.error", { message: L.errorMessage(err) })));
        return;
      }
    }
    render();
  }

  /** Show one scope ("user:<id>" or "group:<id>") in the per-user view. */
  function open(scope) {
    view.scope = scope;
    view.data = null;
    return L.showTab("user");
  }

  function liftPause(scope) {
    const reason = h("input", { type: "text", maxlength: "500", class: "grow", "data-testid": "user-lift-reason",
      placeholder: T("user.lift_reason") });
    L.openModal(T("user.lift_title", { scope: scope }), [h("p", null, T("user.lift_text")),
      h("label", { class: "field" }, h("span", null, T("audit.reason")), reason)], [
      { label: T("common.cancel"), testid: "modal-cancel" },
      { label: T("user.lift"), kind: "danger", testid: "modal-confirm", write: true,
        run: async () => {
          const body = { scope: scope };
          if (reason.value.trim()) body.reason = reason.value.trim();
          const result = await L.apiPost("pauses/lift", body);
          L.toast(result && result.lifted ? T("user.lifted", { scope: scope }) : T("user.was_not_paused", { scope: scope }));
          await load();
          return false;
        } },
    ]);
    reason.focus();
  }

  async function switchWrites(scope, input) {
    const on = input.checked;
    input.disabled = true;
    try {
      const result = await L.apiPost("policy/writes", { scope: scope, writes: on ? "on" : "off", source: "page" });
      if (L.state.policy) L.state.policy.write_policy.disabled_scopes = result.disabled_scopes;
      L.toast(on ? T("user.switched_on", { scope: scope }) : T("user.switched_off", { scope: scope }));
      await load();
    } finally {
      input.disabled = false;
    }
  }

  L.openUser = open;
  L.addTab("user", load);
  L.onLanguage(() => { if (L.state.tab === "user") render(); });
});
