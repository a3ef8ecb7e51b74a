/* The review queue (tab "review"): shadow and awaiting memories as cards,
 * approve, reject and edit one or many (POST items/review, items/<id>/update).
 */
window.LTM.panel("review", (L) => {
  "use strict";
  const {
    T, h, $, fmtNum, fmtTime, typeLabel, statusLabel, scopeLabel, bar, toast, errorMessage, fail, openModal,
    confirmModal, apiGet, apiPost, renderPager, state
  } = L;
  state.queue = { filter: "shadow", type: "", page: 1, pageSize: 25, items: [], total: 0, selected: new Set() };

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
          onclick: () => review([item.memory_id], "approve", "").catch(fail) }, T("queue.approve")),
        h("button", { type: "button", class: "btn danger small write", "data-testid": "reject", disabled: ro, title: blocked,
          onclick: () => confirmReject([item.memory_id], "") }, T("queue.reject")),
        h("button", { type: "button", class: "btn small write", "data-testid": "edit", disabled: ro, title: blocked,
          onclick: () => openEdit(item) }, T("queue.edit")),
        h("button", { type: "button", class: "btn ghost small", "data-testid": "details",
          onclick: () => L.openDetail(item.memory_id).catch(fail) }, T("queue.details")),
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

  /** The bulk bar's reason: it goes with the bulk buttons only, and is used once (bulkReason clears it). */
  function bulkReason() {
    const box = $("#bulk-reason");
    const reason = box.value.trim();
    return { reason: reason, used: () => { box.value = ""; } };
  }

  /** Approve or reject ``ids``; ``reason`` (the bulk bar's, or none for a card's own button) goes to the audit log. */
  async function review(ids, decision, reason) {
    const body = { memory_ids: ids, decision: decision };
    if (reason && ids.length > 0) body.reason = reason;
    const data = await apiPost("items/review", body);
    const n = (data && data.reviewed ? data.reviewed.length : ids.length);
    ids.forEach((id) => state.queue.selected.delete(id));
    toast(decision === "approve" ? T("queue.approved", { n: n }) : T("queue.rejected", { n: n }));
    await Promise.all([loadQueue(), L.refreshStatus()]);
    if (state.tab === "memories") await L.loadSearch();
  }

  /** The dialog says the reason that will be recorded, if any: what the audit log shows is what was confirmed. */
  async function confirmReject(ids, reason) {
    const text = reason ? [T("queue.confirm_reject"), h("br"), h("span", { "data-testid": "reject-reason" },
      T("queue.reason_note", { reason: reason }))] : T("queue.confirm_reject");
    const ok = await confirmModal(T("queue.confirm_reject_title", { n: ids.length }), text, T("queue.reject"), "danger");
    if (ok) await review(ids, "reject", reason).catch(fail);
    return ok;
  }

  // -- edit and detail ----------------------------------------------------------------

  function typeSelect(value, withAny) {
    const sel = h("select", null);
    if (withAny) sel.appendChild(h("option", { value: "" }, T("common.any")));
    state.schema.memory_types.forEach((t) => sel.appendChild(h("option", { value: t, selected: t === value }, typeLabel(t))));
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
      state.schema.memory_types.map((t) => h("option", { value: t }, typeLabel(t))));
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
    const jobs = [L.refreshStatus()];
    if (state.tab === "review") jobs.push(loadQueue());
    if (state.tab === "memories") jobs.push(L.loadSearch());
    await Promise.all(jobs);
  }

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
  $("#bulk-approve").addEventListener("click", () => {
    const given = bulkReason();
    return review(Array.from(state.queue.selected), "approve", given.reason).then(given.used).catch(fail);
  });
  $("#bulk-reject").addEventListener("click", async () => {
    const given = bulkReason();
    if (await confirmReject(Array.from(state.queue.selected), given.reason)) given.used();
  });
  $("#bulk-edit").addEventListener("click", () => openBulkEdit(Array.from(state.queue.selected)));

  return { load: loadQueue, render: renderQueue, review, openEdit, afterChange, updateBulkBar };
});
