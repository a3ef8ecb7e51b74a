/* The drift panel and banner of the review page (GET drift).
 *
 * Separate from app.js: the similarity of each scope kind's consecutive
 * memory-distribution snapshots over time as an inline SVG chart with the
 * threshold line, the newest snapshots as a table, and a banner over the
 * page while an alarm of the last 7 days stands. Texts in both languages
 * live here; colours come from style.css's theme variables (light and dark).
 * The texts' lookup, the element builder and the chart's parts are
 * chart.js's (window.LTMChart). Text only ever reaches the page as text.
 */
(function () {
  "use strict";

  const TEXTS = {
    "en-US": {
      tab: "Drift",
      intro: "Each scope kind's memory distribution is photographed daily and right before and after every policy change. The line is the cosine similarity of each snapshot to the one before; below the threshold (dashed) is an alarm.",
      chart: "Similarity to the previous snapshot",
      threshold: "threshold {value}",
      empty: "No snapshots compared yet: the first daily snapshot is taken at start, the next one a day later or at the next policy change.",
      recent: "Newest snapshots",
      when: "When", kind: "Scope kind", trigger: "Taken", version: "Policy version", similarity: "Similarity",
      memories: "Memories", alarm: "Alarm", yes: "ALARM", none: "—",
      "kind.user": "users", "kind.group": "groups",
      "trigger.daily": "daily", "trigger.before": "before a change", "trigger.after": "after a change", "trigger.manual": "on request",
      banner: "Drift alarm: the memories of {kind} moved (similarity {similarity} < {threshold}) on {when}. Policy version in force before it: {version}.",
      banner_unknown: "unknown (policy versions are not recorded)",
      auto: "Automatic rollback on an alarm: {state}.",
      on: "on", off: "off",
      failed: "Could not load the drift snapshots: {message}",
    },
    "zh-CN": {
      tab: "漂移",
      intro: "每天以及每次策略变更前后，分别为用户和群的记忆分布拍一次快照。曲线是每次快照与上一次的余弦相似度；低于阈值（虚线）即告警。",
      chart: "与上一次快照的相似度",
      threshold: "阈值 {value}",
      empty: "还没有可比较的快照：启动时拍第一次每日快照，一天后或下次策略变更时再拍。",
      recent: "最新快照",
      when: "时间", kind: "范围类别", trigger: "触发", version: "策略版本", similarity: "相似度",
      memories: "记忆数", alarm: "告警", yes: "告警", none: "—",
      "kind.user": "用户", "kind.group": "群",
      "trigger.daily": "每日", "trigger.before": "变更前", "trigger.after": "变更后", "trigger.manual": "手动",
      banner: "漂移告警：{kind}记忆在 {when} 发生明显变化（相似度 {similarity} < {threshold}）。此前生效的策略版本：{version}。",
      banner_unknown: "未知（未记录策略版本）",
      auto: "告警时自动回滚：{state}。",
      on: "开", off: "关",
      failed: "无法加载漂移快照：{message}",
    },
  };
  const C = window.LTMChart;
  const KINDS = ["user", "group"];
  const W = 760, H = 240, PAD = { left: 44, right: 16, top: 14, bottom: 28 };

  const bridge = window.AstrBotPluginPage || window.AstrBotPluginView || null;
  const T = C.texts(TEXTS);
  const el = C.el, svg = C.svg, locale = C.locale;

  function fmtTime(iso) {
    const d = new Date(iso);
    return isNaN(d.getTime()) ? String(iso) : d.toLocaleString(locale());
  }

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
    const wrap = el("div", { class: "table-wrap" });
    const t = el("table", { class: "table", "data-testid": "drift-table" });
    const head = el("tr");
    for (const key of ["when", "kind", "trigger", "version", "memories", "similarity", "alarm"]) head.appendChild(el("th", {}, T(key)));
    t.appendChild(el("thead")).appendChild(head);
    const body = t.appendChild(el("tbody"));
    for (const s of snapshots.slice(0, 20)) {
      const row = el("tr", { "data-alarm": s.alarm ? "1" : "0" });
      row.appendChild(el("td", {}, fmtTime(s.created_at)));
      row.appendChild(el("td", {}, T("kind." + s.scope_kind)));
      row.appendChild(el("td", {}, T("trigger." + s.trigger)));
      row.appendChild(el("td", { class: "num" }, s.policy_version === null ? T("none") : s.policy_version));
      row.appendChild(el("td", { class: "num" }, (s.features && s.features.items) || 0));
      row.appendChild(el("td", { class: "num" }, fmtSim(s.similarity)));
      row.appendChild(el("td", { class: s.alarm ? "drift-alarm-cell" : "" }, s.alarm ? T("yes") : ""));
      body.appendChild(row);
    }
    wrap.appendChild(t);
    return wrap;
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
    if (!bridge) return;
    const tab = document.getElementById("tab-drift");
    if (tab) tab.textContent = T("tab");  // the dashboard's language may have changed
    try {
      const data = await bridge.apiGet("drift", { page_size: "200" });
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
    if (!bridge) return;
    Promise.resolve(bridge.ready()).then(() => {
      if (tab) tab.textContent = T("tab");
      return load();
    }).catch(() => {});
  }

  start();
})();
