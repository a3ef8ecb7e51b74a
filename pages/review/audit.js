/* The audit log (tab "audit"): every change, filtered, with its detail as
 * fields a person reads (auditDetail, also used by user.js).
 */
window.LTM.panel("audit", (L) => {
  "use strict";
  const {
    T, h, $, fmtTime, typeLabel, statusLabel, enumLabel, auditActionLabel, scopeLink, fail, apiGet, fillRows,
    renderPager, readForm, state
  } = L;
  state.audit = { params: {}, page: 1, pageSize: 50, asked: 0 };

  async function loadAudit() {
    const a = state.audit;
    // Only the latest request draws: a slower earlier one (the tab's first load) must not overwrite a filter's answer.
    const asked = ++a.asked;
    const data = await apiGet("audit", Object.assign({}, a.params, { page: a.page, page_size: a.pageSize }));
    if (asked !== a.asked) return;
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
    // A policy change: the setting by its name in the config form and its values in words (the API adds them
    // in the page's language: policy_words.py), the raw path as the tooltip.
    const change = (path, from, to, words) => h("li", { class: "audit-change", "data-path": path },
      h("span", { class: "audit-setting", title: path }, (words && words.setting) || path),
      ": " + (words && words.from_text !== undefined ? words.from_text : shortValue(from)) + " → "
        + (words && words.to_text !== undefined ? words.to_text : shortValue(to)));
    for (const [key, value] of Object.entries(detail)) {
      if (value === null || value === undefined) continue;  // says nothing
      if (key === "changes" && Array.isArray(detail.diff)) continue;  // the diff says the same, path by path
      if (key === "diff" && Array.isArray(value)) {
        if (!value.length) continue;
        lines.push(h("li", { "data-field": key }, h("span", { class: "audit-key" }, auditFieldLabel(key) + ":"),
          h("ul", { class: "audit-diff", "data-testid": "audit-diff" }, value.map((c) => change(c.path, c.from, c.to, c)))));
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

  /** The action filter offers every action by the name the log shows it with (the API takes its code). */
  function fillActions() {
    const select = $("#audit-action");
    const chosen = select.value;
    const codes = L.keysOf("audit.actions");
    select.replaceChildren(h("option", { value: "" }, T("common.any")),
      ...codes.map((code) => h("option", { value: code, "data-action": code }, auditActionLabel(code))));
    select.value = codes.includes(chosen) ? chosen : "";
  }

  fillActions();
  L.onLanguage(fillActions);
  $("#audit-action").addEventListener("change", () => $("#audit-form").requestSubmit());

  $("#audit-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.audit.params = readForm(e.target);
    state.audit.page = 1;
    loadAudit().catch(fail);
  });

  return { load: loadAudit, auditDetail };
});
