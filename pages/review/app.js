/* Operator review page of astrbot_plugin_ltm: the frame around the panels.
 * The emergency read-only banner and its switch, the summary pills, the
 * tabs, and the start once the dashboard's bridge is ready. Everything
 * shared is runtime.js's (window.LTM); each tab is its own file
 * (queue.js, memories.js, stats.js, policy_form.js, transfer.js, audit.js,
 * policy.js, drift.js, replay.js, user.js, preview.js), loaded before this
 * one so that every panel is registered at the first load.
 */
(function () {
  "use strict";
  const L = window.LTM;
  const { T, h, $, toast, fail, notice, confirmModal, closeModal, apiGet, apiPost, state } = L;

  // -- status: banner and summary ------------------------------------------------

  async function refreshStatus() {
    const [policy, stats] = await Promise.all([apiGet("policy"), apiGet("stats")]);
    state.policy = policy;
    state.stats = stats;
    state.readOnly = !!policy.emergency_read_only;
    if (policy.schema && !state.schema.memory_types.length) {
      state.schema = policy.schema;
      L.policyForm.typeControls();
    }
    renderBanner();
    renderSummary();
  }

  function renderBanner() {
    const banner = $("#readonly-banner");
    const toggle = $("#readonly-toggle");
    if (state.readOnly === null) {
      banner.setAttribute("data-state", "unknown");
      $("#readonly-title").textContent = T("ro.unknown");
      $("#readonly-text").textContent = "";
      toggle.disabled = true;
      return;
    }
    const changed = banner.getAttribute("data-state") !== (state.readOnly ? "on" : "off");
    banner.setAttribute("data-state", state.readOnly ? "on" : "off");
    $("#readonly-title").textContent = state.readOnly ? T("ro.on_title") : T("ro.off_title");
    $("#readonly-text").textContent = state.readOnly ? T("ro.on_text") : T("ro.off_text");
    toggle.checked = state.readOnly;
    toggle.disabled = false;
    toggle.setAttribute("aria-checked", String(state.readOnly));
    document.body.classList.toggle("read-only", state.readOnly);
    document.querySelectorAll(".btn.write").forEach((btn) => {
      if (state.readOnly) {
        btn.setAttribute("title", T("common.readonly_blocked"));
      } else {
        btn.removeAttribute("title");
      }
    });
    L.updateBulkBar();
    if (changed && state.queue.items.length) L.tabs.review.render(); // enable or disable the write buttons
    const confirmBtn = $("#import-confirm");
    if (confirmBtn) confirmBtn.disabled = state.readOnly;
    const save = $("#policy-save");
    if (save) save.disabled = false; // policy saves (incl. turning read-only off) stay possible
  }

  function renderSummary() {
    const s = state.stats;
    const box = $("#summary");
    if (!s) return box.replaceChildren();
    const pill = (label, value, testid, title) =>
      h("span", { class: "pill", "data-testid": testid, title: title || null }, label, h("b", null, value));
    // The write mode by its name in the page's language; what it does, on hover.
    const pills = [
      pill(T("summary.mode"), L.enumLabel("modes", s.mode), "summary-mode", L.enumLabel("mode", s.mode)),
      pill(T("summary.queue"), s.totals.shadow, "summary-shadow"),
      pill(T("summary.pending"), s.totals.awaiting_approval, "summary-pending"),
      pill(T("summary.total"), s.totals.items, "summary-total"),
    ];
    if (s.totals.failed_events) pills.push(pill(T("summary.failed"), s.totals.failed_events, "summary-failed"));
    box.replaceChildren(...pills);
    // Search by meaning needs an embedding provider: offered only with one.
    const meaning = !!(s.providers && s.providers.embedding);
    $("#search-meaning-box").hidden = !meaning;
    if (!meaning) $("#search-meaning").checked = false;
    const badge = h("span", { class: "badge", "data-testid": "queue-badge" }, String(s.totals.shadow));
    const tab = $("#tab-review");
    tab.replaceChildren(T("tabs.review"), badge);
  }

  async function onReadOnlyToggle(event) {
    const toggle = event.target;
    const want = toggle.checked;
    toggle.checked = !want; // unchanged until confirmed and saved
    const ok = await confirmModal(
      want ? T("ro.confirm_on_title") : T("ro.confirm_off_title"),
      want ? T("ro.confirm_on") : T("ro.confirm_off"),
      want ? T("ro.turn_on") : T("ro.turn_off"),
      want ? "danger" : "primary",
    );
    if (!ok) return;
    try {
      const policy = await apiPost("policy", { emergency_read_only: want, source: "page" });
      state.policy = policy;
      state.readOnly = !!policy.emergency_read_only;
      renderBanner();
      toast(state.readOnly ? T("ro.turned_on") : T("ro.turned_off"));
      await refreshStatus();
      if (state.tab === "policy") L.fillPolicyForm(state.policy);
    } catch (err) {
      fail(err);
    }
  }

  // -- tabs ----------------------------------------------------------------------

  function showTab(name) {
    state.tab = name;
    document.querySelectorAll(".tab").forEach((tab) => {
      tab.setAttribute("aria-selected", String(tab.getAttribute("data-tab") === name));
    });
    document.querySelectorAll("[data-panel]").forEach((panel) => {
      panel.hidden = panel.getAttribute("data-panel") !== name;
    });
    return loadTab(name);
  }


  /** The tab's loader (its panel's, or one a script added with LTM.addTab); tabs without one load themselves. */
  function loadTab(name) {
    const tab = L.tabs[name];
    return (tab && tab.load ? tab.load() : Promise.resolve()).catch(fail);
  }

  // -- wiring and start ----------------------------------------------------------------

  function wire() {
    document.querySelectorAll(".tab").forEach((tab) => {
      tab.addEventListener("click", () => showTab(tab.getAttribute("data-tab")));
    });
    $("#refresh-all").addEventListener("click", () => Promise.all([refreshStatus(), loadTab(state.tab)]).catch(fail));
    $("#readonly-toggle").addEventListener("change", onReadOnlyToggle);
    $("#modal-close").addEventListener("click", closeModal);
    $("#modal").addEventListener("click", (e) => { if (e.target === $("#modal")) closeModal(); });
    document.addEventListener("keydown", (e) => { if (e.key === "Escape" && !$("#modal").hidden) closeModal(); });
  }

  function rerender() {
    L.applyI18n();
    L.languageHooks.forEach((hook) => hook());
    L.policyForm.typeControls();
    renderBanner();
    renderSummary();
    const tab = L.tabs[state.tab];
    if (tab && tab.render && ["review", "memories", "stats"].includes(state.tab)) tab.render();
  }

  // No bridge (or none that answers): no catalogue and no API to ask, so the page says this in both languages.
  const NO_BRIDGE = "请从 AstrBot 管理面板打开此页面（缺少插件页面桥接）。 · "
    + "This page must be opened from the AstrBot dashboard (the plugin page bridge is missing).";

  async function start() {
    const app = $("#app");
    const bridge = L.bridge;
    wire();
    L.applyI18n();
    renderBanner();
    if (!bridge) {
      notice(NO_BRIDGE);
      // Without texts or an API the rest is empty controls: show the notice alone.
      for (const el of app.children) el.hidden = el.id !== "notice";
      app.setAttribute("aria-busy", "false");
      app.setAttribute("data-ready", "error");
      return;
    }
    const timeout = new Promise((resolve) => setTimeout(resolve, 8000, null));
    const context = await Promise.race([bridge.ready(), timeout]);
    await L.loadTexts();
    if (!context) notice(T("common.no_bridge") || NO_BRIDGE);
    let lastLocale = L.locale();
    bridge.onContext(() => {
      if (L.locale() !== lastLocale) {
        lastLocale = L.locale();
        L.loadTexts().then(rerender);
      }
    });
    L.applyI18n();
    L.languageHooks.forEach((hook) => hook());  // the other scripts' texts, now in the dashboard's language
    try {
      await refreshStatus();
      await showTab("review");
      app.setAttribute("data-ready", "1");
    } catch (err) {
      notice(T("common.error", { message: L.errorMessage(err) }));
      app.setAttribute("data-ready", "error");
    } finally {
      app.setAttribute("aria-busy", "false");
    }
  }

  Object.assign(L, { refreshStatus, showTab, loadTab });
  // After every script of the page has run: every panel is registered before the first load.
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
