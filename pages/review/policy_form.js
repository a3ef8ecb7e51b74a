/* The policy form, one component for the policy tab (index.html's
 * #policy-form) and the replay panel's candidate (replay.js): bounds,
 * steps and choices come from the server (GET policy's ``schema``, built
 * from config.py's ranges), never re-typed here (docs/decisions.md#d111).
 * Also the policy tab itself: fill, save, warnings.
 */
window.LTM.panel("policy", (L) => {
  "use strict";
  const { T, h, $, state } = L;
  const STEPS = { int: "1", float: "0.05" };

  /** A field's bounds or choices from the server's schema (undefined before the first GET policy). */
  const spec = (name) => state.schema.fields[name];

  /** A policy field's name belongs to the policy (its first part is a key of GET policy), not to the form around it. */
  function isPolicyName(name) {
    return !!name && !!state.policy && name.split(".")[0] in state.policy;
  }

  /** Bounds, steps and choices on every policy field of ``form``; a select's labels under its data-choice-texts. */
  function prepare(form) {
    form.querySelectorAll("input[name], select[name]").forEach((input) => {
      const field = spec(input.name);
      if (!field) return;
      if (field.choices && input.tagName === "SELECT") {
        const prefix = input.getAttribute("data-choice-texts");
        const value = input.value;
        input.replaceChildren(...field.choices.map((c) => h("option", { value: c }, prefix ? T(prefix + "." + c) : c)));
        if (field.choices.includes(value)) input.value = value;
      } else if (field.kind && input.type === "number") {
        input.min = String(field.min);
        input.max = String(field.max);
        input.step = STEPS[field.kind];
      }
    });
  }

  /** Every memory type as options of the type selects and as the policy's type check boxes. */
  function typeControls() {
    const types = state.schema.memory_types;
    document.querySelectorAll("select.type-select").forEach((sel) => {
      const value = sel.value;
      sel.replaceChildren(h("option", { value: "" }, T("common.any")), ...types.map((t) => h("option", { value: t }, L.typeLabel(t))));
      sel.value = value;
    });
    document.querySelectorAll(".type-checks").forEach((box) => {
      const chosen = new Set(Array.from(box.querySelectorAll("input:checked")).map((i) => i.value));
      box.replaceChildren(...types.map((t) => h("label", { class: "check" },
        h("input", { type: "checkbox", value: t, checked: chosen.has(t), "data-testid": box.getAttribute("data-name") + "." + t }),
        h("span", null, L.typeLabel(t)))));
    });
  }

  /** ``policy``'s values into the policy fields of ``form``. */
  function fill(form, policy) {
    form.querySelectorAll("[name]").forEach((input) => {
      const value = L.byPath(policy, input.name);
      if (!isPolicyName(input.name) || value === undefined) return;
      if (input.type === "checkbox") input.checked = !!value;
      else input.value = value === null ? "" : String(value);
    });
    form.querySelectorAll(".type-checks").forEach((box) => {
      const chosen = L.byPath(policy, box.getAttribute("data-name")) || [];
      box.querySelectorAll("input").forEach((input) => { input.checked = chosen.includes(input.value); });
    });
  }

  /** The policy fields of ``form`` as a PUT policy body; ``skipEmpty``: blank fields left out. */
  function read(form, skipEmpty) {
    const body = { write_policy: {}, read_policy: {} };
    const put = (path, value) => {
      const parts = path.split(".");
      if (parts.length === 1) body[parts[0]] = value;
      else body[parts[0]][parts[1]] = value;
    };
    form.querySelectorAll("[name]").forEach((input) => {
      if (!isPolicyName(input.name)) return;
      if (input.type === "checkbox") return put(input.name, input.checked);
      const raw = input.value.trim();
      if (skipEmpty && raw === "") return;
      // Unparseable numbers go as typed: the server names the bad field.
      if (input.type === "number") return put(input.name, raw !== "" && isFinite(Number(raw)) ? Number(raw) : raw);
      put(input.name, input.value);
    });
    form.querySelectorAll(".type-checks").forEach((box) => {
      put(box.getAttribute("data-name"), Array.from(box.querySelectorAll("input:checked")).map((i) => i.value));
    });
    return body;
  }

  // -- the policy tab -------------------------------------------------------------------

  function fillPolicyForm(policy) {
    const form = $("#policy-form");
    prepare(form);
    fill(form, policy);
    const warnings = policy.config_warnings || [];
    const warnBox = $("#policy-warnings");
    warnBox.replaceChildren(h("strong", null, T("policy.warnings")), h("ul", null, warnings.map((w) => h("li", null, w))));
    warnBox.hidden = warnings.length === 0;
    $("#policy-error").hidden = true;
  }

  async function savePolicy(event) {
    event.preventDefault();
    const errorBox = $("#policy-error");
    errorBox.hidden = true;
    const save = $("#policy-save");
    save.disabled = true;
    try {
      const policy = await L.apiPost("policy", Object.assign(read($("#policy-form"), false), { source: "page" }));
      state.policy = policy;
      fillPolicyForm(policy);
      L.toast(T("policy.saved"));
      await L.refreshStatus();
    } catch (err) {
      errorBox.textContent = L.errorMessage(err);
      errorBox.hidden = false;
      errorBox.scrollIntoView({ block: "nearest" });
    } finally {
      save.disabled = false;
    }
  }

  $("#policy-form").addEventListener("submit", savePolicy);
  $("#policy-discard").addEventListener("click", () => L.loadTab("policy"));
  L.onLanguage(() => prepare($("#policy-form")));

  return {
    load: () => L.apiGet("policy").then((p) => { state.policy = p; fillPolicyForm(p); }),
    fillPolicyForm,
    policyForm: { prepare, fill, read, typeControls },
  };
});
