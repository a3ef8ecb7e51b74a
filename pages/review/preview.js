/* The injection preview tab of the review page (POST preview): pick a
 * user, optionally a group and a persona, type a message, and see the exact
 * block the reader would inject for it, its token count, where each line
 * comes from, and the lines the budget or the policy cut and why. The same
 * reader as a real turn, with no writes and no usage counted.
 *
 * Everything goes through runtime.js's kit (window.LTM); text only through
 * text nodes.
 */
window.LTM.panel("preview", (L) => {
  "use strict";
  const { h, T } = L;
  const panel = () => document.getElementById("panel-preview");
  const form = { scope: "", group: "", persona: "", message: "" };
  let result = null;

  function scopes(kind) {
    const stats = L.state.stats;
    return ((stats && stats.scopes) || []).filter((s) => s.scope === kind).map((s) => s.scope_id);
  }

  function sourceLabel(source) {
    return L.enumLabel("preview.source", source);
  }

  function score(value) {
    return typeof value === "number" && isFinite(value) ? value.toFixed(3) : T("common.none");
  }

  /** A memory's id opens its details; the other sources' ids are shown as they are. */
  function idCell(line) {
    if (line.id === null || line.id === undefined || line.id === "") return h("td", null, T("common.none"));
    if (line.source !== "memory") return h("td", { class: "small" }, String(line.id));
    return h("td", { class: "small" }, h("button", { type: "button", class: "linkish", "data-testid": "preview-open-memory",
      onclick: () => L.openDetail(line.id) }, String(line.id).slice(0, 8)));
  }

  function field(label, control) {
    return h("label", { class: "field" }, h("span", null, label), control);
  }

  function controls() {
    const bind = (node, key) => { node.value = form[key]; node.addEventListener("input", () => { form[key] = node.value; }); return node; };
    const scope = bind(h("input", { type: "text", list: "preview-scope-list", maxlength: "300", "data-testid": "preview-scope",
      placeholder: T("preview.scope_placeholder") }), "scope");
    const group = bind(h("input", { type: "text", list: "preview-group-list", maxlength: "255", "data-testid": "preview-group" }), "group");
    const persona = bind(h("input", { type: "text", maxlength: "255", "data-testid": "preview-persona" }), "persona");
    const message = bind(h("textarea", { rows: "3", maxlength: "4000", "data-testid": "preview-message",
      placeholder: T("preview.message_placeholder") }), "message");
    const error = h("div", { class: "notice error", "data-testid": "preview-error", hidden: true });
    return h("form", { class: "preview-form", "data-testid": "preview-form", autocomplete: "off",
      onsubmit: (e) => { e.preventDefault(); run(error).catch(L.fail); } },
      h("div", { class: "filters" },
        h("label", { class: "field grow" }, h("span", null, T("preview.scope")), scope,
          h("datalist", { id: "preview-scope-list" }, scopes("user").map((id) => h("option", { value: "user:" + id })))),
        field(T("preview.group"), group),
        h("datalist", { id: "preview-group-list" }, scopes("group").map((id) => h("option", { value: id }))),
        field(T("preview.persona"), persona)),
      h("label", { class: "field" }, h("span", null, T("preview.message")), message),
      error,
      h("div", { class: "form-actions" },
        h("button", { type: "submit", class: "btn primary", "data-testid": "preview-run" }, T("preview.run"))));
  }

  function linesTable(lines) {
    const rows = lines.map((line) => h("tr", { "data-testid": "preview-line", "data-source": line.source, "data-id": line.id },
      h("td", null, h("span", { class: "tag" }, sourceLabel(line.source))),
      idCell(line),
      h("td", { class: "num" }, score(line.score)),
      h("td", { class: "num" }, line.tokens === undefined ? T("common.none") : String(line.tokens)),
      h("td", { class: "fact" }, line.text),
      // A memory line: who may recall it (docs/privacy.md); a turn is this chat's own.
      h("td", { "data-testid": "preview-line-audience" }, line.audience || "")));
    return L.table([T("preview.source_head"), T("preview.id"), { text: T("preview.score"), class: "num" },
      { text: T("preview.tokens_head"), class: "num" }, T("preview.line"), T("preview.audience")], rows,
      T("preview.no_lines"), { "data-testid": "preview-lines" });
  }

  function cutTable(cut) {
    const rows = cut.map((line) => h("tr", { "data-testid": "preview-cut", "data-source": line.source, "data-id": line.id, "data-why": line.why_code || "" },
      h("td", null, h("span", { class: "tag" }, sourceLabel(line.source))),
      idCell(line),
      h("td", { class: "num" }, score(line.score)),
      h("td", { "data-testid": "preview-why" }, line.why || line.why_code || ""),
      h("td", { class: "fact" }, line.text)));
    return L.table([T("preview.source_head"), T("preview.id"), { text: T("preview.score"), class: "num" }, T("preview.why"),
      T("preview.line")], rows, T("preview.no_cut"), { "data-testid": "preview-cut-table" });
  }

  function resultView() {
    if (!result) return null;
    return h("div", { class: "preview-result", "data-testid": "preview-result" },
      h("h2", null, T("preview.block"), " ",
        h("span", { class: "tag", "data-testid": "preview-tokens", "data-tokens": result.tokens }, T("preview.tokens", { n: result.tokens }))),
      result.text
        ? h("pre", { class: "preview-block", "data-testid": "preview-block" }, result.text)
        : h("p", { class: "muted", "data-testid": "preview-empty" }, T("preview.empty")),
      h("h3", null, T("preview.lines")),
      linesTable(result.lines || []),
      h("h3", null, T("preview.cut")),
      cutTable(result.cut || []));
  }

  function render() {
    // No result yet (or the last run failed): no result part, never the text "null".
    const parts = [h("p", { class: "muted" }, T("preview.intro")), controls(), resultView()];
    panel().replaceChildren(...parts.filter(Boolean));
  }

  async function run(error) {
    error.hidden = true;
    const body = { scope: form.scope.trim(), message: form.message };
    if (form.group.trim()) body.group = form.group.trim();
    if (form.persona.trim()) body.persona = form.persona.trim();
    try {
      result = await L.apiPost("preview", body);
    } catch (err) {
      error.textContent = L.errorMessage(err);
      error.hidden = false;
      return;
    }
    render();
  }

  L.addTab("preview", async () => {
    if (!L.state.stats) await L.refreshStatus();
    render();
  });
  L.onLanguage(() => { if (L.state.tab === "preview") render(); });
});
