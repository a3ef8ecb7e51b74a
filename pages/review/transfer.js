/* Export and import (tab "transfer"): download an export, preview an
 * import (dry run) and carry it out.
 */
window.LTM.panel("transfer", (L) => {
  "use strict";
  const { T, h, $, statusLabel, toast, errorMessage, fail, uploadFile, readForm, state } = L;
  state.importFile = null;
  state.importName = "";

  async function downloadExport(event) {
    event.preventDefault();
    const params = readForm($("#export-form"));
    try {
      // The answer is the file itself; its name (ltm-export-<date>.json) comes
      // from the server's Content-Disposition.
      await L.download("export", params);
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
    const limit = state.schema.max_import_bytes;  // the server's (GET policy's schema)
    if (limit && file.size > limit) {
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
      await L.refreshStatus();
    } catch (err) {
      fail(err);
      button.disabled = false;
    }
  }

  $("#export-form").addEventListener("submit", downloadExport);
  $("#import-file").addEventListener("change", onImportFile);
  $("#import-confirm").addEventListener("click", confirmImport);
  $("#import-cancel").addEventListener("click", resetImport);
  // The preview says which status the memories get: ask again when that choice changes.
  $("#import-for-review").addEventListener("change", () => {
    if (state.importFile) onImportFile({ target: { files: [state.importFile] } });
  });

  return { load: () => Promise.resolve(), resetImport };
});
