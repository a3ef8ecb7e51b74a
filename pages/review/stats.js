/* Statistics (tab "stats"): totals, what limits memory now, and per scope
 * counts (GET stats, read by LTM.refreshStatus).
 */
window.LTM.panel("stats", (L) => {
  "use strict";
  const { T, h, $, typeLabel, statusLabel, scopeLink, fillRows, readForm, state } = L;
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
    L.showTab("memories");
  }

  return { load: () => L.refreshStatus().then(renderStats), render: renderStats };
});
