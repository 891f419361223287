// StreamView: the object filling in field by field (strings growing, completed fields
// marked), or a text stream as growing Markdown; then the final result or failure.
import { KINDS } from "./kinds";
import { clear, h, injectCss, jsonTree, markdown, onKernelGone, trySend, markLive } from "./dom";
import { PathKey, StreamState, applyStreamPatch, emptyStream, pathKey } from "./stream";

interface Model {
  get(name: string): any;
  on(event: string, cb: (...args: any[]) => void): void;
  send(content: unknown): void;
}

const CSS = `
.lfx-sv{border:1px solid var(--jp-border-color2,#ddd);border-radius:4px;padding:6px}
.lfx-sv ul{list-style:none;margin:0;padding-left:14px}
.lfx-sv .lfx-open>.lfx-key::after{content:" …";color:#1a56c4}
.lfx-sv .lfx-done>.lfx-key::before{content:"✓ ";color:#137333}
.lfx-sv .lfx-md p{margin:2px 0}
`;

function fieldTree(value: unknown, path: PathKey[], open: Set<string>, done: Set<string>): HTMLElement {
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
    const cls = done.has(k) ? "lfx-done" : open.has(k) ? "lfx-open" : "";
    list.append(h("li", { class: cls, "data-path": k }, h("span", { class: "lfx-key", text: `${key}: ` }), fieldTree(v, p, open, done)));
  }
  return list;
}

export default () => {
  const state: StreamState = emptyStream();
  let seq = 0;
  const listeners = new Set<() => void>();
  const load = (s: any) => {
    if (!s || typeof s !== "object" || !s.mode) return;
    Object.assign(state, emptyStream(), s);
    seq = typeof s.seq === "number" ? s.seq : seq;
  };
  return {
    initialize({ model }: { model: Model }) {
      load(model.get("state"));
      model.on("change:state", () => {
        const s = model.get("state");
        if (!s || typeof s.seq !== "number") return;
        if (s.seq > seq || (s.seq === 0 && seq === 0)) {
          load(s);
          for (const l of listeners) l();
        }
      });
      model.on("msg:custom", (msg: any) => {
        if (msg?.kind === KINDS.EVENTS) {
          if (typeof msg.seq === "number" && msg.seq <= seq) return;
          seq = msg.seq ?? seq;
          for (const p of msg.events) applyStreamPatch(state, p);
        } else if (msg?.kind === KINDS.SNAPSHOT) load({ ...msg.state, seq: msg.seq });
        else return;
        for (const l of listeners) l();
      });
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
      let frame = 0;
      let gone = false;
      const draw = () => {
        frame = 0;
        clear(head);
        head.append("StreamView ", h("span", { class: `lfx-st lfx-st-${state.status}`, text: state.status }));
        if (gone && state.status === "streaming") head.append(h("span", { class: "lfx-err", text: " kernel restarted — this stream stopped here" }));
        clear(body);
        if (state.mode === "text") body.append(markdown(state.text));
        else if (state.value !== null && state.value !== undefined) body.append(fieldTree(state.value, [], new Set(state.open), new Set(state.done)));
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
        if (state.error) foot.append(h("div", { class: "lfx-err", text: state.error }));
        else if (state.status === "complete") foot.append(h("div", { class: "lfx-muted", text: "✓ validated" }));
      };
      const listener = () => {
        if (!frame) frame = requestAnimationFrame(draw);
      };
      listeners.add(listener);
      draw();
      trySend(model, { kind: KINDS.SYNC, seq });
      const stopWatching = onKernelGone(el, model, () => {
        gone = true;
        listener();
      });
      return () => {
        stopWatching();
        listeners.delete(listener);
        if (frame) cancelAnimationFrame(frame);
      };
    },
  };
};

export { jsonTree };
