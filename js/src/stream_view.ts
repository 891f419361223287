// StreamView: the object filling in field by field (strings growing, completed fields
// marked), or a text stream as growing Markdown; then the final result or failure.
import { asText, clear, copyButton, h, injectCss, jsonTree, markdown, markLive } from "./dom";
import { PathKey, StreamState, applyStreamPatch, emptyStream, pathKey } from "./stream";
import { SyncedState } from "./synced";

interface Model {
  get(name: string): any;
  on(event: string, cb: (...args: any[]) => void): void;
  send(content: unknown): void;
}

const CSS = `
.lfx-sv{border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:4px;padding:6px 8px;background:var(--jp-layout-color0,#fff)}
.lfx-sv-head{display:flex;align-items:center;gap:8px;margin-bottom:4px}
.lfx-sv-head .lfx-copy{margin-left:auto}
.lfx-sv ul,.lfx-sv li{list-style:none;margin:0}
.lfx-sv ul{padding-left:14px}
.lfx-sv .lfx-open>.lfx-key::after{content:" …";color:var(--lfx-run)}
.lfx-sv .lfx-done>.lfx-key::before{content:"✓ ";color:color-mix(in srgb,var(--lfx-ok) 75%,var(--lfx-fg0))}
.lfx-sv .lfx-failed>.lfx-key::before{content:"✗ ";color:color-mix(in srgb,var(--lfx-bad) 75%,var(--lfx-fg0))}
.lfx-sv .lfx-failed>.lfx-key{color:color-mix(in srgb,var(--lfx-bad) 75%,var(--lfx-fg0))}
.lfx-sv .lfx-field-err{margin-left:6px}
.lfx-sv .lfx-pending{color:var(--jp-ui-font-color2,#757575);font-style:italic}
.lfx-sv .lfx-pending>.lfx-key::before{content:"○ "}
.lfx-sv .lfx-md p{margin:2px 0}
`;

const FAILED = new Set(["parsing_failed", "validation_failed", "generation_failed"]);

/** The value as a tree: open fields end in "…", completed ones get ✓, fields that failed
 *  validation get ✗ and their message; schema fields not started yet are placeholders. */
function fieldTree(state: StreamState, value: unknown, path: PathKey[], open: Set<string>, done: Set<string>): HTMLElement {
  if (value === null || typeof value !== "object") {
    const text = typeof value === "string" ? value : value === undefined ? "" : JSON.stringify(value);
    return h("span", { class: `lfx-v lfx-v-${value === null ? "null" : typeof value}`, text });
  }
  const entries: [PathKey, unknown][] = Array.isArray(value)
    ? value.map((v, i) => [i, v])
    : Object.entries(value as Record<string, unknown>);
  const list = h("ul");
  for (const [key, v] of entries) {
    const p = [...path, key];
    const k = pathKey(p);
    const err = state.field_errors[k];
    const cls = err ? "lfx-failed" : done.has(k) ? "lfx-done" : open.has(k) ? "lfx-open" : "";
    const li = h("li", { class: cls, "data-path": k }, h("span", { class: "lfx-key", text: `${key}: ` }), fieldTree(state, v, p, open, done));
    if (err) li.append(h("span", { class: "lfx-err lfx-field-err", text: `— ${err}` }));
    list.append(li);
  }
  if (path.length === 0 && !Array.isArray(value)) {
    const has = value as Record<string, unknown>;
    const ended = state.status !== "streaming" && state.status !== "idle";
    for (const f of state.fields) {
      if (f.name in has) continue;
      const k = pathKey([f.name]);
      const missing = state.missing.includes(k) || (ended && FAILED.has(state.status) && f.required);
      list.append(h("li", { class: missing ? "lfx-failed" : "lfx-pending", "data-path": k },
        h("span", { class: "lfx-key", text: `${f.name}: ` }),
        h("span", { class: missing ? "lfx-err" : "", text: missing ? "missing (required)" : ended ? "not given" : "not started" })));
    }
  }
  return list;
}

/** What a finished stream says about itself: text streams are "done", structured answers
 *  "validated" only when the value validated. */
function verdict(state: StreamState): string {
  if (state.mode === "text") return state.status === "done" || state.status === "complete" ? "done" : "";
  return state.status === "complete" ? "✓ validated" : "";
}

export default () => {
  const state: StreamState = emptyStream();
  const synced = new SyncedState<any>((s) => {
    if (!s.mode) return false;
    Object.assign(state, emptyStream(), s);
    return true;
  }, (p) => applyStreamPatch(state, p));
  return {
    initialize({ model }: { model: Model }) {
      synced.follow(model);
    },
    render({ model, el }: { model: Model; el: HTMLElement }) {
      const root = h("div", { class: "lfx lfx-sv" });
      injectCss(root, CSS);
      const head = h("div", { class: "lfx-muted" });
      const body = h("div", { class: "lfx-sv-body" });
      const foot = h("div");
      root.append(head, body, foot);
      el.append(root);
      markLive(el);
      head.className = "lfx-sv-head";
      let gone = false;
      const draw = () => {
        clear(head);
        head.append(h("b", { class: "lfx-sv-title", text: state.title || "Answer" }), h("span", { class: `lfx-st lfx-st-${state.status}`, text: state.status }));
        if (gone && state.status === "streaming") head.append(h("span", { class: "lfx-err", text: " kernel restarted — this stream stopped here" }));
        if (state.mode === "text" ? state.text : state.value != null) head.append(copyButton(() => (state.mode === "text" ? state.text : asText(state.value))));
        clear(body);
        if (state.mode === "text") body.append(markdown(state.text));
        else if (state.value !== null && state.value !== undefined) body.append(fieldTree(state, state.value, [], new Set(state.open), new Set(state.done)));
        else if (state.fields.length && state.mode !== "idle") body.append(fieldTree(state, {}, [], new Set(), new Set()));
        const tools = Object.entries(state.tools);
        if (tools.length) {
          const list = h("ul", { class: "lfx-sv-tools" });
          for (const [id, t] of tools) {
            list.append(h("li", { class: t.done ? "lfx-done" : "lfx-open" },
              h("span", { class: "lfx-key", text: `tool call ${t.name} (${id}) ` }),
              t.done ? jsonTree(t.args) : h("code", { text: t.args_text })));
          }
          body.append(list);
        }
        clear(foot);
        if (state.missing.length) {
          const names = state.missing.map((k) => (JSON.parse(k) as PathKey[]).join("."));
          foot.append(h("div", { class: "lfx-err lfx-sv-missing", text: `missing required: ${names.join(", ")}` }));
        }
        // field errors are named at their fields above: the foot says so, not the same text
        // again; an error of the whole answer (no field) is shown as it is
        const marked = Object.keys(state.field_errors).filter((k) => k !== "[]").length;
        const whole = "[]" in state.field_errors || (!marked && !state.missing.length);
        if (state.error && marked) foot.append(h("div", { class: "lfx-err lfx-sv-invalid", text: `${marked} field${marked === 1 ? "" : "s"} did not validate (marked ✗ above)` }));
        if (state.error && whole) foot.append(h("div", { class: "lfx-err", text: state.error }));
        else if (verdict(state)) foot.append(h("div", { class: "lfx-muted lfx-sv-verdict", text: verdict(state) }));
      };
      return synced.drawView(model, el, draw, () => {
        gone = true;
      });
    },
  };
};

export { jsonTree };
