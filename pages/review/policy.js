/* Policy versions and the per-scope write switch on the review page.
 *
 * The "Policy history" tab lists the policy versions (GET policy/history),
 * shows one version's whole policy, and rolls back to a version (POST
 * policy/rollback) after a confirmation. On the statistics tab every scope
 * row gets a switch for its writes (POST policy/writes). Everything goes
 * through app.js's helpers (window.LTM): the dashboard bridge, the dialog,
 * toasts, tables; the texts' lookup is chart.js's. Text only through textContent.
 */
(function () {
  "use strict";
  const L = window.LTM;
  if (!L || !window.LTMChart) return;

  const TEXTS = {
    "en-US": {
      tab: "Policy history",
      intro: "Every change of the write or read policy, the on/off switch and read-only is a numbered version. Rolling back makes an old version's policy current at once, as a new version.",
      reason_placeholder: "Reason for a rollback or a switch (optional, kept with the version)",
      version: "Version", time: "Time", who: "Who", reason: "Reason", changes: "Changes",
      current: "current", initial: "the policy at the first start", rollback_of: "rollback to version {n}",
      show: "Policy", rollback: "Roll back",
      confirm_title: "Roll back to version {n}?",
      confirm_text: "Version {n}'s policy becomes current at once and is saved to the plugin's config. This is recorded as a new version.",
      rolled: "Rolled back: version {n} is in force.", unchanged: "Version {n}'s policy is already in force.",
      policy_title: "Policy of version {n}", empty: "No policy version recorded yet.",
      writes_head: "Writes", writes_on: "learning", writes_off: "off",
      switched_off: "Writes off for {scope}.", switched_on: "Writes on for {scope}.",
      source_startup: "first start", source_api: "API", source_page: "this page", source_command: "command",
      "source_webui-config": "AstrBot config page", source_rollback: "rollback",
    },
    "zh-CN": {
      tab: "策略历史",
      intro: "写入策略、读取策略、总开关和只读模式的每次变更都会生成一个编号版本。回滚会让旧版本的策略立即生效，并记为一个新版本。",
      reason_placeholder: "回滚或切换的原因（可选，随版本保存）",
      version: "版本", time: "时间", who: "操作者", reason: "原因", changes: "变更",
      current: "当前", initial: "首次启动时的策略", rollback_of: "回滚到版本 {n}",
      show: "策略", rollback: "回滚",
      confirm_title: "回滚到版本 {n}？",
      confirm_text: "版本 {n} 的策略将立即生效并保存到插件配置，并记为一个新版本。",
      rolled: "已回滚：版本 {n} 的策略已生效。", unchanged: "版本 {n} 的策略已在生效。",
      policy_title: "版本 {n} 的策略", empty: "尚无策略版本。",
      writes_head: "写入", writes_on: "学习中", writes_off: "已关闭",
      switched_off: "已关闭 {scope} 的写入。", switched_on: "已开启 {scope} 的写入。",
      source_startup: "首次启动", source_api: "API", source_page: "本页面", source_command: "命令",
      "source_webui-config": "AstrBot 配置页", source_rollback: "回滚",
    },
  };

  const t = window.LTMChart.texts(TEXTS);  // chart.js: the dashboard's language, else English

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

  function diffList(row) {
    if (!row.diff.length) return L.h("span", { class: "muted small" }, t("initial"));
    return L.h("ul", { class: "history-diff", "data-testid": "history-diff" }, row.diff.map((c) =>
      L.h("li", null, L.h("code", null, c.path), " ", shown(c.from), " → ", shown(c.to))));
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
        L.h("td", null, row.actor, L.h("div", { class: "muted small" }, t("source_" + row.source))),
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

  async function rollback(version) {
    const ok = await L.confirmModal(t("confirm_title", { n: version }), t("confirm_text", { n: version }),
      t("rollback"), "primary");
    if (!ok) return;
    const result = await L.apiPost("policy/rollback", withReason({ version: version }));
    L.toast(result.changed ? t("rolled", { n: version }) : t("unchanged", { n: version }));
    $("#history-reason").value = "";
    history.page = 1;
    await Promise.all([loadHistory(), L.refreshStatus()]);
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
  // app.js redraws the statistics rows; each redraw gets its switches.
  new MutationObserver(addSwitches).observe($("#stats-rows"), { childList: true });
  // The dashboard's language can change while the page is open.
  new MutationObserver(applyTexts).observe(document.documentElement, { attributes: true, attributeFilter: ["lang"] });
})();
