/* All memories (tab "memories"): search and filters over every memory
 * (GET items), and one memory's detail dialog with its evidence and history.
 */
window.LTM.panel("memories", (L) => {
  "use strict";
  const {
    T, h, $, fmtNum, fmtTime, typeLabel, statusLabel, enumLabel, scopeLabel, scopeLink, ttlLabel, bar,
    eventText, toast, fail, openModal, closeModal, confirmModal, apiGet, apiPost, fillRows, renderPager,
    readForm, state
  } = L;
  state.search = { params: { sort: "updated", page_size: "25" }, page: 1, items: [], total: 0, pageSize: 25 };

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
        run: () => L.review([item.memory_id], "approve") });
    }
    // A superseded value is history: read or deleted, never edited or switched on.
    if (!superseded) buttons.push({ label: T("queue.edit"), testid: "detail-edit", write: true, run: () => { closeModal(); L.openEdit(item); return true; } });
    const disable = item.status === "disabled";
    if (!superseded) buttons.push({
      label: disable ? T("detail.enable") : T("detail.disable"), testid: "detail-toggle", write: true,
      run: async () => {
        await apiPost("items/" + item.memory_id + "/update", { status: disable ? "active" : "disabled" });
        toast(T("detail.updated"));
        await L.afterChange();
      },
    });
    buttons.push({
      label: T("detail.delete"), kind: "danger", testid: "detail-delete", write: true,
      run: async () => {
        closeModal();
        const ok = await confirmModal(T("detail.confirm_delete_title"), T("detail.confirm_delete"), T("detail.delete"), "danger");
        if (!ok) return true;
        await apiPost("items/" + item.memory_id + "/delete", {}).then(() => toast(T("detail.deleted"))).catch(fail);
        await L.afterChange();
        return true;
      },
    });
    buttons.push({ label: T("common.close"), testid: "detail-close" });
    openModal(T("detail.title"), body, buttons);
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

  return { load: loadSearch, render: renderSearch, loadSearch, openDetail: (id) => openDetail(id).catch(fail) };
});
