/* Policy versions and the per-scope write switch on the review page.
 *
 * The "Policy history" tab lists the policy versions (GET policy/history),
 * shows one version's whole policy, and rolls back to a version (POST
 * policy/rollback) after a confirmation. On the statistics tab every scope
 * row gets a switch for its writes (POST policy/writes). Everything goes
 * through runtime.js's helpers (window.LTM): the dashboard bridge, the dialog,
 * toasts, tables, texts. Text only through textContent.
 */
(function () {
  "use strict";
  const L = window.LTM;

  // Texts: .astrbot-plugin/i18n/*.json under views.review.history (runtime.js's T).
  const t = (key, vars) => L.T("history." + key, vars);

  const $ = (sel) => document.querySelector(sel);
  const history = { page: 1, pageSize: 20 };

  // Where each of this panel's texts goes in index.html.
  const LABELS = {
    "#tab-history": "tab", "#history-intro": "intro", "#history-h-version": "version", "#history-h-time": "time",
    "#history-h-who": "who", "#history-h-reason": "reason", "#history-h-diff": "changes", "#stats-writes-head": "writes_head",
  };

  function applyTexts() {
    for (const [sel, key] of Object.entries(LABELS)) $(sel).textContent = t(key);
    $("#history-reason").setAttribute("placeholder", t("reason_placeholder"));
  }

  /** The operator's reason for a rollback or a switch (the box above the history), added to ``body``. */
  function withReason(body) {
    const reason = $("#history-reason").value.trim();
    return reason ? { ...body, reason: reason } : body;
  }

  function button(cls, testid, text, action, disabled) {
    return L.h("button", { type: "button", class: "btn small" + (cls ? " " + cls : ""), "data-testid": testid,
      disabled: !!disabled, onclick: () => action().catch(L.fail) }, text);
  }

  const reloadHistory = () => loadHistory().catch(L.fail);

  function shown(value) {
    return typeof value === "string" ? value : JSON.stringify(value);
  }

  /** Each changed setting by its name in the config form, its values in words (the API's, in the page's
   * language: policy_words.py); the raw path is the tooltip. */
  function changes(diff, testid) {
    return L.h("ul", { class: "history-diff", "data-testid": testid }, diff.map((c) =>
      L.h("li", { "data-path": c.path }, L.h("span", { class: "setting", title: c.path }, c.setting || c.path), ": ",
        c.from_text !== undefined ? c.from_text : shown(c.from), " → ", c.to_text !== undefined ? c.to_text : shown(c.to))));
  }

  /** Only the version recorded at the first start changed nothing; an older empty one says so. */
  function diffList(row) {
    if (!row.diff.length) return L.h("span", { class: "muted small" }, t(row.source === "startup" ? "initial" : "no_change_row"));
    return changes(row.diff, "history-diff");
  }

  // -- the history tab -----------------------------------------------------------

  async function loadHistory() {
    const data = await L.apiGet("policy/history", { page: history.page, page_size: history.pageSize });
    const rows = data.versions.map((row) => {
      const current = row.version === data.current;
      return L.h("tr", { class: "history-row", "data-testid": "history-row", "data-version": row.version,
        "data-current": current ? "1" : "0" },
        L.h("td", null, L.h("b", null, "v" + row.version),
          current ? L.h("span", { class: "tag status-active", "data-testid": "history-current" }, t("current")) : null),
        L.h("td", null, L.fmtTime(row.created_at)),
        L.h("td", null, row.actor, L.h("div", { class: "muted small" }, L.enumLabel("history.source", row.source))),
        L.h("td", null, row.reason || (row.rollback_of ? t("rollback_of", { n: row.rollback_of }) : "")),
        L.h("td", null, diffList(row)),
        L.h("td", null,
          button("", "history-show", t("show"), () => showVersion(row.version)),
          " ",
          button("primary", "history-rollback", t("rollback"), () => rollback(row.version), current)));
    });
    L.fillRows($("#history-rows"), rows, t("empty"));
    L.renderPager($("#history-pager"), history.page, history.pageSize, data.total, (page) => {
      history.page = page;
      reloadHistory();
    }, "history-pager");
  }

  async function showVersion(version) {
    const data = await L.apiGet("policy/history/" + version);
    L.openModal(t("policy_title", { n: version }),
      L.h("pre", { class: "history-policy", "data-testid": "history-policy" }, JSON.stringify(data.policy, null, 2)),
      []);
  }

  /** First a dry run (what would change, and the warnings), then the operator confirms the rollback. */
  async function rollback(version) {
    const planned = await L.apiPost("policy/rollback", { version: version, dry_run: true });
    const diff = planned.diff || [];
    const warnings = planned.warnings || [];
    const body = [
      L.h("p", null, t("confirm_text", { n: version })),
      L.h("h3", null, t("will_change")),
      diff.length ? changes(diff, "rollback-diff") : L.h("p", { class: "muted", "data-testid": "rollback-no-change" }, t("no_change")),
      warnings.length
        ? L.h("div", { class: "notice warn", "data-testid": "rollback-warnings" }, L.h("strong", null, t("warnings")),
          L.h("ul", null, warnings.map((w) => L.h("li", { "data-testid": "rollback-warning", "data-code": w.code }, w.message))))
        : null,
    ];
    L.openModal(t("confirm_title", { n: version }), body, [
      { label: L.T("common.cancel"), testid: "modal-cancel" },
      { label: t("rollback"), kind: "primary", testid: "modal-confirm",
        run: async () => {
          const result = await L.apiPost("policy/rollback", withReason({ version: version }));
          L.toast(result.changed ? t("rolled", { n: version }) : t("unchanged", { n: version }));
          $("#history-reason").value = "";
          history.page = 1;
          await Promise.all([loadHistory(), L.refreshStatus()]);
          return false;
        } },
    ]);
  }

  // -- the write switch on the statistics rows ----------------------------------

  function disabledScopes() {
    const policy = L.state.policy;
    return (policy && policy.write_policy && policy.write_policy.disabled_scopes) || [];
  }

  function addSwitches() {
    const off = disabledScopes();
    document.querySelectorAll('#stats-rows tr[data-testid="stats-row"]').forEach((row) => {
      if (row.querySelector(".writes-cell")) return;
      const scope = row.getAttribute("data-scope") + ":" + row.getAttribute("data-scope-id");
      const on = off.indexOf(scope) < 0;
      const label = L.h("span", { class: "switch-label", "data-testid": "writes-label" }, on ? t("writes_on") : t("writes_off"));
      const input = L.h("input", { type: "checkbox", role: "switch", checked: on, "data-testid": "writes-toggle",
        "aria-label": t("writes_head") + " " + scope,
        onchange: () => switchWrites(scope, input, label).catch((err) => { input.checked = !input.checked; L.fail(err); }) });
      row.appendChild(L.h("td", { class: "writes-cell" },
        L.h("label", { class: "switch writes-switch", "data-testid": "writes-switch", "data-scope": scope },
          input, L.h("span", { class: "switch-track", "aria-hidden": "true" }, L.h("span", { class: "switch-thumb" })), label)));
    });
  }

  async function switchWrites(scope, input, label) {
    const on = input.checked;
    input.disabled = true;
    try {
      const result = await L.apiPost("policy/writes", withReason({ scope: scope, writes: on ? "on" : "off" }));
      if (L.state.policy) L.state.policy.write_policy.disabled_scopes = result.disabled_scopes;
      label.textContent = on ? t("writes_on") : t("writes_off");
      L.toast(on ? t("switched_on", { scope: scope }) : t("switched_off", { scope: scope }));
    } finally {
      input.disabled = false;
    }
  }

  // -- wiring ------------------------------------------------------------------------

  applyTexts();
  $("#tab-history").addEventListener("click", reloadHistory);
  $("#refresh-all").addEventListener("click", () => {
    if (L.state.tab === "history") reloadHistory();
  });
  // stats.js redraws the statistics rows; each redraw gets its switches.
  new MutationObserver(addSwitches).observe($("#stats-rows"), { childList: true });
  // The dashboard's language can change while the page is open.
  L.onLanguage(applyTexts);
})();
