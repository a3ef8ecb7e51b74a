/* The review page's runtime (window.LTM), loaded before every panel: the
 * dashboard bridge, the API calls and their error display, the element and
 * table builders, time and number formatting, the texts (the dashboard's
 * catalogue, else the plugin's texts route), the dialog and toasts, the
 * page's shared state and the server's policy schema, and the panel
 * registry. No panel re-implements any of these (docs/decisions.md#d110).
 *
 * Runs in AstrBot's sandboxed plugin-view iframe: every API call goes
 * through window.AstrBotPluginPage (the dashboard's bridge), texts come from
 * .astrbot-plugin/i18n/<locale>.json under "views.review" (English where a
 * locale lacks a key), and user text only ever reaches the page through
 * textContent: no string is ever parsed as HTML.
 */
(function () {
  "use strict";

  const PREFIX = "views.review";
  // The catalogue the plugin's own "texts" route answered (loadTexts), in the bridge's shape.
  let served = {};
  const bridge = window.AstrBotPluginPage || window.AstrBotPluginView || null;
  const SVG = "http://www.w3.org/2000/svg";
  const BOOLEAN_PROPS = ["checked", "disabled", "selected"];

  // -- i18n ------------------------------------------------------------------

  function byPath(source, path) {
    let cur = source;
    for (const part of path.split(".")) {
      if (!cur || typeof cur !== "object" || !(part in cur)) return undefined;
      cur = cur[part];
    }
    return cur;
  }

  function locale() {
    try {
      return (bridge && bridge.getLocale()) || "en-US";
    } catch (e) {
      return "en-US";
    }
  }

  /** "zh" or "en": the language the page asks the API to answer in. */
  function lang() {
    return String(locale()).toLowerCase().startsWith("zh") ? "zh" : "en";
  }

  /** The catalogues to read, the dashboard's first: each {locale: {views: {review: …}}}. */
  function catalogues() {
    let handed = {};
    try {
      handed = (bridge && bridge.getI18n()) || {};
    } catch (e) {
      handed = {};
    }
    return [handed, served];
  }

  /** What ``path`` (under views.review) holds in the dashboard's language, else in English. */
  function lookup(path) {
    for (const all of catalogues()) {
      for (const loc of [locale(), "en-US"]) {
        const found = byPath(all[loc], PREFIX + "." + path);
        if (found !== undefined) return found;
      }
    }
    return undefined;
  }

  /** The English catalogue's keys under ``group`` (e.g. "audit.actions"): the codes it names. */
  function keysOf(group) {
    for (const all of catalogues()) {
      const found = byPath(all["en-US"], PREFIX + "." + group);
      if (found && typeof found === "object") return Object.keys(found);
    }
    return [];
  }

  /** Whether any catalogue holds the page's English yet. */
  function loaded() {
    return catalogues().some((all) => typeof byPath(all["en-US"], PREFIX) === "object");
  }

  /** A dashboard that hands the page no catalogue: AstrBot serves the iframe
   * only pages/review/, so the plugin's "texts" route reads the locale files for it. */
  async function loadTexts() {
    if (!bridge || typeof byPath(catalogues()[0]["en-US"], PREFIX) === "object" || served[locale()]) return;
    // A bridge no dashboard answers never settles: give up after a while (the texts stay empty).
    const timeout = new Promise((resolve) => setTimeout(resolve, 5000, null));
    try {
      served = (await Promise.race([bridge.apiGet("texts", { locale: locale() }), timeout])) || {};
    } catch (e) {
      served = {};
    }
  }

  /** The text of ``key`` in the dashboard's language, else English, else the
   * key; nothing while no catalogue has come (no key flashes up first). */
  function T(key, vars) {
    const found = lookup(key);
    let text = typeof found === "string" && found ? found : loaded() ? key : "";
    if (vars) {
      text = text.replace(/\{(\w+)\}/g, (m, name) => (name in vars ? String(vars[name]) : m));
    }
    return text;
  }

  function applyI18n(root) {
    (root || document).querySelectorAll("[data-i18n]").forEach((el) => {
      el.textContent = T(el.getAttribute("data-i18n"));
    });
    (root || document).querySelectorAll("[data-i18n-placeholder]").forEach((el) => {
      el.setAttribute("placeholder", T(el.getAttribute("data-i18n-placeholder")));
    });
    (root || document).querySelectorAll("[data-i18n-label]").forEach((el) => {
      el.setAttribute("aria-label", T(el.getAttribute("data-i18n-label")));
    });
    document.title = T("title");
    document.documentElement.lang = locale();
  }

  // -- DOM helpers (text only through textContent) ---------------------------

  // -- DOM helpers (text only through textContent) ---------------------------

  /** An element in namespace ``ns`` (null: HTML); props left out when null/undefined/false. */
  function node(ns, tag, props, children) {
    const el = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") el.setAttribute("class", value);
      else if (key === "text") el.textContent = String(value);
      else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
      // "" is an attribute's way of saying true (disabled: "").
      else if (!ns && BOOLEAN_PROPS.includes(key)) el[key] = value === "" ? true : value;
      else if (!ns && key === "value") el.value = value;
      else el.setAttribute(key, value === true ? "" : String(value));
    }
    children.forEach((c) => append(el, c));
    return el;
  }

  /** An HTML element: h(tag, props, ...children); children are nodes, text or arrays of them. */
  function h(tag, props) {
    return node(null, tag, props, Array.prototype.slice.call(arguments, 2));
  }

  /** An SVG element, as h. */
  function svg(tag, props) {
    return node(SVG, tag, props, Array.prototype.slice.call(arguments, 2));
  }

  function append(el, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) {
      child.forEach((c) => append(el, c));
      return;
    }
    el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }

  const $ = (sel) => document.querySelector(sel);

  function fmtNum(value, digits) {
    return typeof value === "number" && isFinite(value) ? value.toFixed(digits === undefined ? 2 : digits) : T("common.none");
  }

  function fmtTime(iso) {
    if (!iso) return T("common.none");
    const d = new Date(iso);
    if (isNaN(d.getTime())) return String(iso);
    try {
      return d.toLocaleString(locale());
    } catch (e) {
      return d.toISOString();
    }
  }

  function typeLabel(type) {
    return enumLabel("types", type);
  }

  function statusLabel(status) {
    return ["active", "shadow", "disabled", "expired", "superseded"].includes(status) ? T("status." + status) : String(status);
  }

  /** A stored enum value (a method, a source type, a role, an action) in the page's language; unknown ones as they are. */
  function enumLabel(group, value) {
    const key = group + "." + value;
    return typeof lookup(key) === "string" ? T(key) : String(value);
  }

  function auditActionLabel(action) {
    return enumLabel("audit.actions", action);
  }

  function scopeLabel(scope, scopeId) {
    const kind = scope === "user" || scope === "group" ? T("scope." + scope) : String(scope);
    return kind + " · " + String(scopeId);
  }

  /** A scope that opens its per-user view (user.js) when clicked; plain text without that view. */
  function scopeLink(scope, scopeId) {
    const open = LTM.openUser;
    if (!open) return scopeLabel(scope, scopeId);
    const id = scope + ":" + scopeId;
    return h("button", { type: "button", class: "linkish", "data-testid": "scope-link", "data-scope": id, title: T("user.open"),
      onclick: (e) => { e.stopPropagation(); open(id); },
      onkeydown: (e) => { e.stopPropagation(); } }, scopeLabel(scope, scopeId));
  }

  function ttlLabel(days) {
    return days === null || days === undefined ? T("common.permanent") : T("common.days", { n: days });
  }

  function bar(value) {
    const pct = Math.max(0, Math.min(1, Number(value) || 0)) * 100;
    return h("span", { class: "bar", "aria-hidden": "true" }, h("span", { style: "width:" + pct.toFixed(0) + "%" }));
  }

  function eventText(event) {
    const content = event && event.content;
    if (content && typeof content.text === "string") return content.text;
    try {
      return JSON.stringify(content, null, 2);
    } catch (e) {
      return String(content);
    }
  }

  // -- notices, toasts, dialog -------------------------------------------------


  function toast(message, kind) {
    const el = h("div", { class: "toast " + (kind || "ok"), "data-testid": "toast", "data-kind": kind || "ok" }, message);
    $("#toasts").appendChild(el);
    setTimeout(() => el.remove(), kind === "error" ? 9000 : 4500);
  }

  function errorMessage(err) {
    return (err && err.message) || String(err);
  }

  function fail(err) {
    toast(T("common.error", { message: errorMessage(err) }), "error");
  }

  function notice(message) {
    const el = $("#notice");
    el.textContent = message || "";
    el.hidden = !message;
  }

  let modalClose = null;

  /** A dialog with a title, body nodes and buttons [{label, kind, testid, run}]. */
  function openModal(title, body, buttons, opts) {
    $("#modal-title").textContent = title;
    $("#modal-body").replaceChildren(...(Array.isArray(body) ? body : [body]).flat(Infinity).filter(Boolean));
    const actions = $("#modal-actions");
    actions.replaceChildren();
    (buttons || []).forEach((b) => {
      const btn = h("button", {
        type: "button",
        class: "btn " + (b.kind || "ghost") + (b.write ? " write" : ""),
        "data-testid": b.testid || null,
        disabled: b.write && state.readOnly ? true : null,
        title: b.write && state.readOnly ? T("common.readonly_blocked") : null,
      }, b.label);
      btn.addEventListener("click", async () => {
        if (!b.run) return closeModal();
        btn.disabled = true;
        try {
          const keep = await b.run();
          if (!keep) closeModal();
          else btn.disabled = false;
        } catch (err) {
          fail(err);
          btn.disabled = false;
        }
      });
      actions.appendChild(btn);
    });
    modalClose = (opts && opts.onClose) || null;
    $("#modal").hidden = false;
    const focus = actions.querySelector("button:not(:disabled)") || $("#modal-close");
    if (focus) focus.focus();
  }

  function closeModal() {
    $("#modal").hidden = true;
    $("#modal-body").replaceChildren();
    const done = modalClose;
    modalClose = null;
    if (done) done();
  }

  function confirmModal(title, text, label, kind) {
    return new Promise((resolve) => {
      let answered = false;
      openModal(title, h("p", null, text), [
        { label: T("common.cancel"), testid: "modal-cancel", run: () => { answered = true; resolve(false); } },
        { label: label, kind: kind || "danger", testid: "modal-confirm", run: () => { answered = true; resolve(true); } },
      ], { onClose: () => { if (!answered) resolve(false); } });
    });
  }

  // -- the API through the dashboard bridge ------------------------------------


  function cleanParams(params) {
    const out = {};
    Object.entries(params || {}).forEach(([k, v]) => {
      if (v !== null && v !== undefined && String(v).trim() !== "") out[k] = String(v).trim();
    });
    return out;
  }

  function apiGet(endpoint, params) {
    if (!bridge) return Promise.reject(new Error(T("common.no_bridge")));
    return bridge.apiGet(endpoint, Object.assign(cleanParams(params), { lang: lang() }));
  }

  function uploadFile(endpoint, file, extra) {
    if (!bridge) return Promise.reject(new Error(T("common.no_bridge")));
    // The file as JSON in the body: for dashboards whose page bridge cannot
    // upload (AstrBot before 4.29 answers "Network Error"). Checksums are over
    // the values, so parsing and sending them again changes nothing.
    const asJson = () => file.text().then((text) => apiPost(endpoint, Object.assign({ export: JSON.parse(text) }, extra || {})));
    // Extra fields (an import for review's status) go with the JSON body.
    if (typeof bridge.upload !== "function" || extra) return asJson();
    return bridge.upload(endpoint, file).catch((err) =>
      /network error/i.test(String((err && err.message) || err)) ? asJson() : Promise.reject(err));
  }

  function apiPost(endpoint, body) {
    if (!bridge) return Promise.reject(new Error(T("common.no_bridge")));
    // The page's language rides along, so messages and reasons come back in it.
    const payload = body && typeof body === "object" && !Array.isArray(body) ? body : {};
    return bridge.apiPost(endpoint, Object.assign({ lang: lang() }, payload));
  }


  /** The export file: the answer is the file itself, named by the server's Content-Disposition. */
  function download(endpoint, params) {
    if (!bridge) return Promise.reject(new Error(T("common.no_bridge")));
    return bridge.download(endpoint, cleanParams(params));
  }

  // -- tables, pager, forms -----------------------------------------------------------

  /** A table body's rows; none: one muted row saying ``emptyText`` (null: no row) across every column of the header. */
  function fillRows(body, rows, emptyText, emptyAttrs) {
    if (rows.length || emptyText === null) {
      body.replaceChildren(...rows);
      return;
    }
    const columns = body.closest("table").querySelectorAll("thead th").length || 1;
    body.replaceChildren(h("tr", null, h("td", { colspan: String(columns), class: "muted", ...emptyAttrs }, emptyText)));
  }


  /** A whole table: ``headers`` [text | {text, class}], ``rows`` <tr> nodes, ``emptyText`` when none. */
  function table(headers, rows, emptyText, attrs) {
    const head = h("tr", null, headers.map((c) => typeof c === "string" ? h("th", null, c) : h("th", { class: c.class || null }, c.text)));
    const body = h("tbody");
    const tbl = h("table", Object.assign({ class: "table" }, attrs || {}), h("thead", null, head), body);
    fillRows(body, rows, emptyText);
    return h("div", { class: "table-wrap" }, tbl);
  }

  function renderPager(box, page, pageSize, total, go, testid) {
    const pages = Math.max(1, Math.ceil(total / pageSize));
    box.replaceChildren(
      h("span", { "data-testid": testid + "-info" }, T("common.page", { page: page, pages: pages, total: total })),
      h("button", { type: "button", class: "btn small", disabled: page <= 1, "data-testid": testid + "-prev", onclick: () => go(page - 1) }, T("common.prev")),
      h("button", { type: "button", class: "btn small", disabled: page >= pages, "data-testid": testid + "-next", onclick: () => go(page + 1) }, T("common.next")),
    );
  }

  function readForm(form) {
    const out = {};
    new FormData(form).forEach((value, key) => { out[key] = String(value); });
    return out;
  }

  // -- state shared by the panels ---------------------------------------------------------

  const state = {
    tab: "review",
    readOnly: null,
    policy: null,
    stats: null,
    // GET policy's ``schema``: memory types, the policy's bounds and choices, the import limit.
    schema: { memory_types: [], fields: {}, max_import_bytes: 0 },
  };

  // -- the panel registry -------------------------------------------------------------

  const tabs = {};
  const languageHooks = [];

  /** A panel: ``build(L)`` runs now and may return {tab, load, render, ...helpers for other panels}. */
  function panel(name, build) {
    const made = build(LTM) || {};
    if (made.load || made.render) tabs[name] = { load: made.load, render: made.render };
    for (const [key, value] of Object.entries(made)) {
      if (key !== "load" && key !== "render") LTM[key] = value;
    }
  }

  const LTM = {
    bridge, T, lang, locale, byPath, keysOf, loadTexts, applyI18n, h, el: h, svg, $, fmtNum, fmtTime, typeLabel, statusLabel, enumLabel,
    auditActionLabel, scopeLabel, scopeLink, ttlLabel, bar, eventText, toast, errorMessage, fail, notice, openModal,
    closeModal, confirmModal, cleanParams, apiGet, apiPost, uploadFile, download, fillRows, table, renderPager, readForm,
    state, panel, tabs,
    /** A tab of another script: its loader runs each time the tab is shown. */
    addTab: (name, loader) => { tabs[name] = { load: loader }; },
    /** Run ``hook`` when the dashboard's language changes. */
    onLanguage: (hook) => { languageHooks.push(hook); },
    languageHooks,
    /** The per-user view (user.js sets it). */
    openUser: null,
  };
  window.LTM = LTM;
})();
