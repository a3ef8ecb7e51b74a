/* The drift panel and banner of the review page (GET drift).
 *
 * A panel of its own: the similarity of each scope kind's consecutive
 * memory-distribution snapshots over time as an inline SVG chart with the
 * threshold line, the newest snapshots as a table, and a banner over the
 * page while an alarm of the last 7 days stands. Texts are in
 * .astrbot-plugin/i18n/*.json under views.review.drift; colours come from
 * style.css's theme variables (light and dark). The API, texts, element and
 * table builders are runtime.js's (window.LTM), the chart's parts chart.js's
 * (window.LTMChart). Text only ever reaches the page as text.
 */
(function () {
  "use strict";

  const C = window.LTMChart;
  const L = window.LTM;
  const KINDS = ["user", "group"];
  const W = 760, H = 240, PAD = { left: 44, right: 16, top: 14, bottom: 28 };

  const T = (key, vars) => L.T("drift." + key, vars);
  const el = L.h, svg = L.svg, fmtTime = L.fmtTime;

  function fmtSim(value) {
    return value === null || value === undefined ? T("none") : Number(value).toFixed(3);
  }

  // -- the chart ---------------------------------------------------------------

  /** Similarity over time, one line per scope kind, the threshold dashed. */
  function chart(snapshots, threshold) {
    const points = snapshots.filter((s) => s.similarity !== null && s.similarity !== undefined)
      .slice().sort((a, b) => a.id - b.id);
    const box = C.frame(W, H, T("chart"),
      { class: "drift-chart", "data-testid": "drift-chart", "data-points": points.length });
    // One step per snapshot round (both kinds share a round's time): policy
    // changes minutes apart stay as readable as daily snapshots.
    const rounds = Array.from(new Set(points.map((p) => p.created_at)));
    const step = new Map(rounds.map((t, i) => [t, i]));
    const lo = Math.max(0, Math.floor((Math.min(threshold, ...points.map((p) => p.similarity)) - 0.05) * 10) / 10);
    const x = (p) => {
      const frac = rounds.length > 1 ? step.get(p.created_at) / (rounds.length - 1) : 0.5;
      return PAD.left + frac * (W - PAD.left - PAD.right);
    };
    const y = (v) => PAD.top + (1 - (v - lo) / (1 - lo || 1)) * (H - PAD.top - PAD.bottom);
    for (const tick of [lo, (lo + 1) / 2, 1]) {  // lo is a tenth: ticks like 0.4, 0.7, 1.0
      box.appendChild(C.hline(PAD.left, W - PAD.right, y(tick), "drift-grid"));
      box.appendChild(C.label(PAD.left - 6, y(tick) + 4, "drift-axis", tick.toFixed(2), "end"));
    }
    box.appendChild(C.hline(PAD.left, W - PAD.right, y(threshold), "drift-threshold",
      { "data-testid": "drift-threshold" }));
    if (points.length) {
      box.appendChild(C.label(PAD.left, H - 8, "drift-axis", fmtTime(points[0].created_at)));
      box.appendChild(C.label(W - PAD.right, H - 8, "drift-axis", fmtTime(points[points.length - 1].created_at), "end"));
    }
    KINDS.forEach((kind) => {
      const mine = points.filter((p) => p.scope_kind === kind);
      if (!mine.length) return;
      box.appendChild(svg("polyline", {
        points: mine.map((p) => `${x(p).toFixed(1)},${y(p.similarity).toFixed(1)}`).join(" "),
        class: "drift-line drift-" + kind, "data-testid": "drift-line-" + kind,
      }));
      for (const p of mine) {
        const dot = svg("circle", {
          cx: x(p).toFixed(1), cy: y(p.similarity).toFixed(1), r: p.alarm ? 5 : 3,
          class: "drift-dot drift-" + kind + (p.alarm ? " drift-alarm" : ""),
        });
        dot.appendChild(svg("title", {}, `${T("kind." + kind)} · ${fmtTime(p.created_at)} · ${fmtSim(p.similarity)}`));
        box.appendChild(dot);
      }
    });
    return box;
  }

  function legend(threshold) {
    const key = (swatch, text) => el("span", { class: "drift-key" }, [el("span", { class: "drift-swatch " + swatch }), text]);
    return el("div", { class: "drift-legend" }, [
      ...KINDS.map((kind) => key("drift-" + kind, T("kind." + kind))),
      key("drift-threshold-key", T("threshold", { value: threshold })),
    ]);
  }

  function table(snapshots) {
    const rows = snapshots.slice(0, 20).map((s) => el("tr", { "data-alarm": s.alarm ? "1" : "0" },
      el("td", {}, fmtTime(s.created_at)),
      el("td", {}, T("kind." + s.scope_kind)),
      el("td", {}, T("trigger." + s.trigger)),
      el("td", { class: "num" }, s.policy_version === null ? T("none") : s.policy_version),
      el("td", { class: "num" }, (s.features && s.features.items) || 0),
      el("td", { class: "num" }, fmtSim(s.similarity)),
      el("td", { class: s.alarm ? "drift-alarm-cell" : "" }, s.alarm ? T("yes") : "")));
    return L.table(["when", "kind_head", "trigger_head", "version", "memories", "similarity", "alarm"].map((key) => T(key)), rows,
      T("none"), { "data-testid": "drift-table" });
  }

  // -- the banner ----------------------------------------------------------------

  function banner(data) {
    let box = document.getElementById("drift-banner");
    if (!box) {
      box = el("div", { id: "drift-banner", class: "drift-banner", role: "alert", "data-testid": "drift-banner" });
      const anchor = document.getElementById("readonly-banner");
      if (anchor && anchor.parentNode) anchor.parentNode.insertBefore(box, anchor.nextSibling);
      else document.body.prepend(box);
    }
    const alarm = data && data.latest_alarm;
    box.hidden = !alarm;
    if (!alarm) return;
    box.textContent = T("banner", {
      kind: T("kind." + alarm.scope_kind), similarity: fmtSim(alarm.similarity), threshold: alarm.threshold,
      when: fmtTime(alarm.created_at),
      version: alarm.policy_version === null ? T("banner_unknown") : alarm.policy_version,
    });
    box.setAttribute("data-version", alarm.policy_version === null ? "" : String(alarm.policy_version));
  }

  // -- loading -------------------------------------------------------------------

  function render(data) {
    const panel = document.getElementById("panel-drift");
    if (!panel) return;
    panel.replaceChildren();
    panel.appendChild(el("p", { class: "muted" }, T("intro")));
    panel.appendChild(el("p", { class: "muted", "data-testid": "drift-min-items" },
      // How many memories of a scope kind an alarm needs: the server says (GET drift).
      T("min_items", { n: data.min_items_for_alarm })));
    panel.appendChild(el("p", { class: "muted", "data-testid": "drift-auto" },
      T("auto", { state: data.auto_rollback ? T("on") : T("off") })));
    panel.appendChild(el("h2", {}, T("chart")));
    const compared = data.snapshots.filter((s) => s.similarity !== null && s.similarity !== undefined);
    if (!compared.length) panel.appendChild(el("p", { class: "muted", "data-testid": "drift-empty" }, T("empty")));
    panel.appendChild(legend(data.threshold));
    panel.appendChild(el("div", { class: "drift-chart-wrap" })).appendChild(chart(data.snapshots, data.threshold));
    panel.appendChild(el("h2", {}, T("recent")));
    panel.appendChild(table(data.snapshots));
    panel.setAttribute("data-loaded", "1");
  }

  async function load() {
    const tab = document.getElementById("tab-drift");
    if (tab) tab.textContent = T("tab");  // the dashboard's language may have changed
    try {
      const data = await L.apiGet("drift", { page_size: "200" });
      banner(data);
      render(data);
    } catch (err) {
      const panel = document.getElementById("panel-drift");
      const message = (err && (err.message || err.toString())) || "error";
      if (panel) panel.replaceChildren(el("div", { class: "notice error" }, T("failed", { message: message })));
    }
  }

  function start() {
    const tab = document.getElementById("tab-drift");
    if (tab) {
      tab.textContent = T("tab");
      tab.addEventListener("click", load);
    }
    const refresh = document.getElementById("refresh-all");
    if (refresh) refresh.addEventListener("click", load);
    // Once the dashboard is connected, and again when its language changes: the banner and the texts.
    L.onLanguage(load);
  }

  start();
})();
