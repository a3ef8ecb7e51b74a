/* The replay panel of the review page: replay the recorded history under a
 * candidate policy (POST policy/replay), follow the job, show its report
 * side by side with the current policy and a chart of the key figures;
 * tune the thresholds (POST policy/tune) and show the proposal; the
 * holdout replay set (GET policy/holdout, POST policy/holdout/redraw).
 *
 * A panel of its own. Texts are in .astrbot-plugin/i18n/*.json under
 * views.review.replay; colours come from style.css's theme variables (light
 * and dark). The API calls, texts, element and table builders and the policy
 * form are runtime.js's and policy_form.js's (window.LTM), the chart's parts
 * chart.js's (window.LTMChart). Text only
 * ever reaches the page as text.
 */
(function () {
  "use strict";

  const C = window.LTMChart;
  const POLL_MS = 700;
  const state = { policy: null, jobId: null, timer: null, tune: null };
  // Texts: .astrbot-plugin/i18n/*.json under views.review.replay (runtime.js's T).
  const L = window.LTM;
  const T = (key, vars) => L.T("replay." + key, vars);
  const el = L.h, svg = L.svg;
  const panel = () => document.querySelector('[data-panel="replay"]');
  const q = (sel) => panel().querySelector(sel);

  // runtime.js's calls: the page's language goes with each one.
  const apiGet = L.apiGet, apiPost = L.apiPost, message = L.errorMessage;

  function say(text, kind) {
    const box = q("#replay-notice");
    box.textContent = text || "";
    box.hidden = !text;
    box.className = "notice " + (kind || "ok");
  }

  function fmt(value, digits) {
    if (typeof value !== "number" || !isFinite(value)) return T("none");
    return Number.isInteger(value) && digits === undefined ? String(value) : value.toFixed(digits === undefined ? 2 : digits);
  }

  // -- the panel's skeleton -----------------------------------------------------------

  function field(label, input) {
    return el("label", { class: "field" }, [el("span", null, label), input]);
  }

  /** A policy field; its bounds and step come from the server (LTM.policyForm.prepare). */
  function number(name) {
    return el("input", { type: "number", name: name, "data-testid": "replay-" + name.replace(/[._]/g, "-") });
  }

  function build() {
    const root = panel();
    if (!root || root.getAttribute("data-built")) return;
    root.setAttribute("data-built", "1");
    const mode = el("select", { name: "write_policy.mode", "data-testid": "replay-mode" });  // choices: the server's
    const set = el("select", { name: "set", "data-testid": "replay-set" },
      ["holdout", "fitting", "all"].map((s) => el("option", { value: s, "data-replay-i18n": "set." + s }, T("set." + s))));
    root.replaceChildren(
      el("p", { class: "muted", "data-replay-i18n": "intro" }, T("intro")),
      el("div", { class: "card replay-holdout", "data-testid": "replay-holdout" }, [
        el("h2", { "data-replay-i18n": "holdout" }, T("holdout")),
        el("p", { id: "replay-holdout-info", "data-testid": "replay-holdout-info" }),
        el("div", { class: "toolbar" }, [
          field(T("share"), el("input", { type: "number", id: "replay-share", min: "1", max: "100", step: "1", value: "20", "data-testid": "replay-share" })),
          el("button", { type: "button", class: "btn write", id: "replay-redraw", "data-testid": "replay-redraw", "data-replay-i18n": "redraw" }, T("redraw")),
        ]),
      ]),
      el("form", { id: "replay-form", class: "card replay-form", "data-testid": "replay-form", autocomplete: "off" }, [
        el("h2", { "data-replay-i18n": "candidate" }, T("candidate")),
        el("div", { class: "grid" }, [
          field(T("mode"), mode),
          field(T("w_min_confidence"), number("write_policy.min_confidence")),
          field(T("w_min_evidence"), number("write_policy.min_evidence_count")),
          field(T("r_max_tokens"), number("read_policy.max_tokens")),
          field(T("r_max_items"), number("read_policy.max_items")),
          field(T("r_max_events"), number("read_policy.max_events")),
          field(T("r_min_confidence"), number("read_policy.min_confidence")),
          field(T("set_head"), set),
          field(T("scopes"), el("input", { type: "text", name: "scopes", maxlength: "2000", "data-testid": "replay-scopes" })),
          field(T("since"), el("input", { type: "date", name: "since", "data-testid": "replay-since" })),
        ]),
        el("div", { class: "form-actions" }, [
          el("button", { type: "submit", class: "btn primary", id: "replay-start", "data-testid": "replay-start" }, T("start")),
          el("button", { type: "button", class: "btn", id: "replay-tune", "data-testid": "replay-tune" }, T("tune")),
          el("button", { type: "button", class: "btn ghost", id: "replay-cancel", "data-testid": "replay-cancel", disabled: "" }, T("cancel")),
        ]),
      ]),
      el("div", { class: "replay-progress", id: "replay-progress", "data-testid": "replay-progress", hidden: "" }, [
        el("div", { class: "replay-progress-bar" }, el("span", { id: "replay-progress-fill" })),
        el("span", { id: "replay-progress-text", class: "muted" }),
      ]),
      el("div", { id: "replay-notice", class: "notice", "data-testid": "replay-notice", role: "status", hidden: "" }),
      el("div", { id: "replay-report", "data-testid": "replay-report" }),
    );
    q("#replay-form").addEventListener("submit", (e) => { e.preventDefault(); startReplay(); });
    q("#replay-tune").addEventListener("click", startTune);
    q("#replay-cancel").addEventListener("click", cancelJob);
    q("#replay-redraw").addEventListener("click", redraw);
  }

  // The candidate's fields are the policy form's (policy_form.js): filled and read the same way.
  function fillForm(policy) {
    const form = q("#replay-form");
    L.policyForm.prepare(form);
    L.policyForm.fill(form, policy);
  }

  function candidatePolicy() {
    return L.policyForm.read(q("#replay-form"), true);
  }

  // -- the holdout set ----------------------------------------------------------------

  function renderHoldout(h) {
    const info = q("#replay-holdout-info");
    if (!h.drawn) {
      info.textContent = T("holdout_none");
      return;
    }
    const rule = h.rule && h.rule.scopes && h.rule.scopes.length
      ? T("rule_scopes", { scopes: h.rule.scopes.join(", ") })
      : T("rule_share", { share: Math.round(((h.rule && h.rule.share) || 0) * 100) });
    info.textContent = T("holdout_info", { size: h.size, recorded: h.recorded_sessions, when: window.LTM.fmtTime(h.drawn_at), rule: rule });
  }

  async function redraw() {
    const share = Number(q("#replay-share").value) / 100;
    try {
      const h = await apiPost("policy/holdout/redraw", { share: share });
      renderHoldout(h);
      say(T("redrawn", { size: h.size }), "ok");
    } catch (err) {
      say(T("error", { message: message(err) }), "error");
    }
  }

  // -- jobs ---------------------------------------------------------------------------

  function body() {
    const form = q("#replay-form");
    const out = { policy: candidatePolicy(), set: form.querySelector('[name="set"]').value };
    const scopes = form.querySelector('[name="scopes"]').value.split(",").map((s) => s.trim()).filter(Boolean);
    if (scopes.length) out.scopes = scopes;
    const since = form.querySelector('[name="since"]').value;
    if (since) out.since = since;
    return out;
  }

  async function startReplay() {
    await start("policy/replay", body());
  }

  async function startTune() {
    const b = body();
    const out = {};
    if (b.scopes) out.scopes = b.scopes;
    if (b.since) out.since = b.since;
    await start("policy/tune", out);
  }

  async function start(endpoint, payload) {
    say("");
    try {
      const answer = await apiPost(endpoint, payload);
      follow(answer.job_id);
    } catch (err) {
      say(T("error", { message: message(err) }), "error");
    }
  }

  function busy(on) {
    q("#replay-start").disabled = on;
    q("#replay-tune").disabled = on;
    if (on) q("#replay-cancel").removeAttribute("disabled");
    else q("#replay-cancel").setAttribute("disabled", "");
    q("#replay-progress").hidden = !on;
  }

  function follow(jobId) {
    state.jobId = jobId;
    busy(true);
    const poll = async () => {
      let job;
      try {
        job = await apiGet("policy/replay/" + jobId);
      } catch (err) {
        busy(false);
        say(T("error", { message: message(err) }), "error");
        return;
      }
      const p = job.progress || {};
      q("#replay-progress-fill").style.width = Math.round((p.share || 0) * 100) + "%";
      q("#replay-progress-text").textContent = T("running", { kind: job.kind, stage: p.stage || "", done: p.done || 0, total: p.total || 0 });
      if (job.status === "running") {
        state.timer = setTimeout(poll, POLL_MS);
        return;
      }
      busy(false);
      state.jobId = null;
      if (job.status === "done") {
        if (job.kind === "tune") renderTune(job.report);
        else renderReport(job.report);
        q("#replay-report").setAttribute("data-job", jobId);
      } else if (job.status === "cancelled") {
        say(T("cancelled"), "warn");
      } else {
        say(T("failed", { message: job.error || "" }), "error");
      }
    };
    poll();
  }

  async function cancelJob() {
    if (!state.jobId) return;
    try {
      await apiPost("policy/replay/" + state.jobId + "/cancel", {});
    } catch (err) {
      say(T("error", { message: message(err) }), "error");
    }
  }

  // -- the replay report ----------------------------------------------------------------

  function rows(report) {
    const c = report.current, n = report.candidate;
    const w = (side, key) => side.writes.by_outcome[key];
    return [
      ["active", w(c, "active"), w(n, "active")],
      ["shadow", w(c, "shadow"), w(n, "shadow")],
      ["awaiting", w(c, "awaiting_approval"), w(n, "awaiting_approval")],
      ["refused", w(c, "refused"), w(n, "refused")],
      ["tokens_mean", c.reads.tokens_per_turn_mean, n.reads.tokens_per_turn_mean],
      ["tokens_p95", c.reads.tokens_per_turn_p95, n.reads.tokens_per_turn_p95],
      ["memories", c.reads.memories_per_block, n.reads.memories_per_block],
      ["turns", c.reads.turns_per_block, n.reads.turns_per_block],
      ["violations", c.reads.budget_violations, n.reads.budget_violations],
      ["latency", c.reads.latency_p95_ms, n.reads.latency_p95_ms],
      ["self_recall", c.self_recall.share, n.self_recall.share],
      ["unsafe", c.safety.instruction_like_live + c.safety.cross_scope_live, n.safety.instruction_like_live + n.safety.cross_scope_live],
      ["score", c.score, n.score],
    ];
  }

  /** Pairs of horizontal bars, each pair scaled to its larger value. */
  function chart(report) {
    const keys = ["active", "tokens_mean", "self_recall", "latency", "score"];
    const data = rows(report).filter((r) => keys.includes(r[0]));
    const W = 720, rowH = 44, left = 230, right = 70, H = data.length * rowH + 30;
    const root = C.frame(W, H, T("chart"), { class: "replay-chart", "data-testid": "replay-chart" });
    root.appendChild(svg("title", null, T("chart")));
    data.forEach((r, i) => {
      const y = i * rowH + 6;
      const top = Math.max(Math.abs(r[1]) || 0, Math.abs(r[2]) || 0) || 1;
      root.appendChild(C.label(0, y + 22, "replay-chart-label", T(r[0])));
      [[r[1], "replay-bar-current", 0], [r[2], "replay-bar-candidate", 1]].forEach(([value, cls, k]) => {
        const width = Math.max(1, (W - left - right) * Math.abs(value || 0) / top);
        root.appendChild(C.bar(left, y + k * 17, width.toFixed(1), 14, cls, { rx: 3 }));
        root.appendChild(C.label(left + width + 6, y + k * 17 + 12, "replay-chart-value", fmt(value)));
      });
    });
    const ly = H - 10;
    root.append(...C.key(left, ly, "replay-bar-current", T("current"), "replay-chart-value"),
      ...C.key(left + 110, ly, "replay-bar-candidate", T("cand"), "replay-chart-value"));
    return root;
  }

  /** runtime.js's table: the first column text, the others figures. */
  function table(head, body, testid) {
    return L.table(head.map((x, i) => ({ text: x, class: i ? "num" : null })),
      body.map((r) => el("tr", null, r.map((x, i) => el("td", { class: i ? "num" : null }, x)))), null, { "data-testid": testid });
  }

  function renderReport(report) {
    const figures = rows(report).map((r) => [T(r[0]), fmt(r[1]), fmt(r[2])]);
    const differs = report.status_differs;
    const events = report.events.candidates + report.events.reads + report.events.self_recall_memories;
    q("#replay-report").replaceChildren(
      el("h2", null, T("report")),
      el("p", { class: "replay-verdict", "data-testid": "replay-verdict" }, [el("strong", null, T("verdict") + ": "), report.verdict]),
      el("p", { class: "muted", "data-testid": "replay-speed" },
        T("speed", { events: events, seconds: fmt(report.speed.seconds), rate: fmt(report.speed.events_per_second, 1) })),
      chart(report),
      table([T("figure"), T("current"), T("cand")], figures, "replay-figures"),
      el("h3", null, T("differs", { n: differs.count })),
      table([T("fact"), T("type"), T("scope"), T("current"), T("cand")],
        differs.examples.map((d) => [d.fact, d.type, d.scope, d.current, d.candidate]), "replay-differs"),
    );
  }

  // -- the tuning report ----------------------------------------------------------------

  function renderTune(report) {
    state.tune = report;
    const diff = Object.entries(report.diff || {}).map(([k, v]) => [k, fmt(v[0]), fmt(v[1])]);
    const s = report.scores;
    const buttons = report.proposal ? el("div", { class: "form-actions" }, [
      el("button", { type: "button", class: "btn primary write", "data-testid": "replay-apply" }, T("apply")),
      el("button", { type: "button", class: "btn ghost", "data-testid": "replay-discard" }, T("discard")),
    ]) : null;
    q("#replay-report").replaceChildren(
      el("h2", null, T("tune_report")),
      el("p", { class: "replay-verdict", "data-testid": "replay-tune-outcome", "data-outcome": report.outcome },
        [el("strong", null, T("outcome_head") + ": " + T("outcome." + report.outcome) + ". "), report.message]),
      table([T("setting"), T("current"), T("cand")], diff, "replay-tune-diff"),
      table([T("figure"), T("current"), T("cand")], [
        [T("fit_score"), fmt(s.fitting.current), fmt(s.fitting.candidate)],
        [T("hold_score"), fmt(s.holdout.current), fmt(s.holdout.candidate)],
      ], "replay-tune-scores"),
    );
    if (buttons) q("#replay-report").appendChild(buttons);
    if (buttons) {
      buttons.children[0].addEventListener("click", async () => {
        try {
          await apiPost("policy", report.proposal);
          say(T("applied"), "ok");
          buttons.remove();
          await load();
        } catch (err) {
          say(T("error", { message: message(err) }), "error");
        }
      });
      buttons.children[1].addEventListener("click", () => {
        buttons.remove();
        say(T("discarded"), "ok");
      });
    }
  }

  // -- loading --------------------------------------------------------------------------

  async function load() {
    build();
    try {
      const [policy, holdout] = await Promise.all([apiGet("policy"), apiGet("policy/holdout")]);
      state.policy = policy;
      fillForm(policy);
      renderHoldout(holdout);
      panel().setAttribute("data-ready", "1");
    } catch (err) {
      say(T("error", { message: message(err) }), "error");
    }
  }

  function relabel() {
    const tab = document.getElementById("tab-replay");
    if (tab) tab.textContent = T("tab");
  }

  function init() {
    relabel();
    const tab = document.getElementById("tab-replay");
    if (tab) tab.addEventListener("click", () => { relabel(); load(); });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
