/* Statistics (tab "stats"): totals, what limits memory now, what memory
 * costs on disk with the compact action (GET/POST compact), and per scope
 * counts (GET stats, read by LTM.refreshStatus).
 */
window.LTM.panel("stats", (L) => {
  "use strict";
  const { T, h, $, typeLabel, statusLabel, scopeLink, fillRows, readForm, state, apiGet, apiPost, confirmModal, toast,
    errorMessage } = L;
  const POLL_MS = 700;
  const size = (n) => {
    let v = Number(n || 0);
    for (const unit of ["B", "KB", "MB", "GB", "TB"]) {
      if (Math.abs(v) < 1024 || unit === "TB") return unit === "B" ? v.toFixed(0) + " B" : v.toFixed(1) + " " + unit;
      v /= 1024;
    }
    return v.toFixed(1) + " TB";
  };

  // -- what memory costs on disk, and the compact action ---------------------------------
  function storageSection() {
    let section = $("#stats-storage");
    if (section) return section;
    section = h("section", { id: "stats-storage", class: "storage", "data-testid": "stats-storage" },
      h("h2", null, T("storage.title")),
      h("div", { class: "stat-cards", id: "storage-cards", "data-testid": "storage-cards" }),
      h("div", { class: "kv", id: "storage-tables", "data-testid": "storage-tables" }),
      h("p", { class: "muted" }, T("storage.file_note")),
      h("h3", null, T("storage.compact_title")),
      h("p", { class: "muted" }, T("storage.compact_help")),
      h("form", { class: "inline", id: "compact-form", "data-testid": "compact-form", onsubmit: (e) => { e.preventDefault(); plan(); } },
        h("label", null, T("storage.days") + " ",
          h("input", { type: "number", min: "1", max: "36500", step: "1", id: "compact-days", "data-testid": "compact-days" })),
        h("button", { type: "submit", class: "btn", "data-testid": "compact-plan" }, T("storage.plan")),
        h("button", { type: "button", class: "btn danger", id: "compact-run", "data-testid": "compact-run", disabled: true,
          onclick: run }, T("storage.run"))),
      h("p", { id: "compact-result", "data-testid": "compact-result", hidden: true }));
    $("#stat-cards").after(section);
    return section;
  }

  function renderStorage(s) {
    const d = s.storage;
    if (!d) return;
    storageSection();
    const card = (label, value, alert, testid) =>
      h("div", { class: "stat" + (alert ? " alert" : ""), "data-testid": testid },
        h("div", { class: "value" }, String(value)), h("div", { class: "label" }, label));
    const soon = d.days_until_full !== null && d.days_until_full < 30;
    $("#storage-cards").replaceChildren(
      card(T("storage.total"), size(d.total_bytes), false, "storage-total"),
      card(T("storage.growth"), size(d.growth_per_day), false, "storage-growth"),
      card(T("storage.oldest"), d.oldest_turn ? d.oldest_turn.slice(0, 16) : T("common.none"), false, "storage-oldest"),
      card(T("storage.turns"), d.turns, false, "storage-turns"),
      card(T("storage.disk_free"), d.disk_free_bytes === null ? T("common.none") : size(d.disk_free_bytes), soon, "storage-disk"),
      card(T("storage.days_until_full"), d.days_until_full === null ? "∞" : Math.floor(d.days_until_full), soon, "storage-days"),
    );
    const tables = Object.entries(d.tables || {}).slice(0, 8)
      .map(([name, n]) => h("span", { class: "tag", "data-testid": "storage-table", "data-table": name }, name + " " + size(n)));
    tables.push(h("span", { class: "tag" }, T("storage.vector_files", { n: d.vector_files, size: size(d.vector_files_bytes) })));
    tables.push(h("span", { class: "tag" }, T("storage.free_in_file", { size: size(d.free_in_file_bytes) })));
    $("#storage-tables").replaceChildren(...tables);
    const days = $("#compact-days");
    if (!days.value) days.value = s.retention_days_turns || 90;
  }

  function result(text, kind) {
    const el = $("#compact-result");
    el.textContent = text;
    el.hidden = false;
    el.className = "notice " + (kind || "ok");
  }

  let planned = null;

  async function plan() {
    $("#compact-run").disabled = true;
    try {
      const p = await apiGet("compact", { days: $("#compact-days").value });
      planned = p;
      result(T("storage.would_free", { turns: p.turns.turns, size: size(p.bytes), days: p.days,
        files: p.vector_files.files }), "ok");
      $("#compact-run").disabled = state.readOnly || (p.turns.turns === 0 && p.vector_files.files === 0);
    } catch (err) {
      result(T("common.error", { message: errorMessage(err) }), "error");
    }
  }

  async function run() {
    if (!planned) return;
    const ok = await confirmModal(T("storage.confirm_title"), T("storage.confirm", { turns: planned.turns.turns,
      days: planned.days, size: size(planned.bytes) }), T("storage.run"));
    if (!ok) return;
    $("#compact-run").disabled = true;
    let job;
    try {
      job = await apiPost("compact", { days: planned.days });
    } catch (err) {
      result(T("common.error", { message: errorMessage(err) }), "error");
      return;
    }
    const poll = async () => {
      let j;
      try {
        j = await apiGet("compact/" + job.job_id);
      } catch (err) {
        result(T("common.error", { message: errorMessage(err) }), "error");
        return;
      }
      const p = j.progress || {};
      if (j.status === "running") {
        result(T("storage.running", { done: p.done || 0, total: p.total || 0 }), "ok");
        setTimeout(poll, POLL_MS);
        return;
      }
      planned = null;
      if (j.status === "done") {
        const r = j.report;
        result(T("storage.freed", { turns: r.turns.turns, size: size(r.bytes), batches: r.turns.batches,
          files: r.vector_files_removed }), "ok");
        toast(T("storage.freed_short", { turns: r.turns.turns }), "ok");
      } else {
        result(T("storage.not_freed", { status: j.status, message: j.error || "" }), "error");
      }
      L.refreshStatus().then(renderStats);
    };
    poll();
  }

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
    renderStorage(s);
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
