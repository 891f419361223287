// Tool-approval prompt. Every decision message carries the prompt id and call id it was made
// for; the kernel accepts it only for that pending call, once (stale/second clicks are refused).
import { KINDS } from "./kinds";
import { clear, h, injectCss, jsonTree } from "./dom";
import { schemaForm } from "./schema_form";

interface Model {
  get(name: string): any;
  on(event: string, cb: (...args: any[]) => void): void;
  off(event?: string, cb?: (...args: any[]) => void): void;
  send(content: unknown): void;
}

const CSS = `
.lfx-ap{border:1px solid var(--jp-border-color2,#ddd);border-radius:4px;padding:6px}
.lfx-ap-pending{border-left:3px solid #f9ab00;padding-left:8px;margin-bottom:6px}
.lfx-form-row{display:flex;gap:6px;align-items:center;margin:2px 0}
.lfx-form-row input[type=text],.lfx-form-row textarea{min-width:260px}
.lfx-ap-hist{margin:4px 0 0 0;padding-left:16px}
`;

export default {
  render({ model, el }: { model: Model; el: HTMLElement }) {
    const root = h("div", { class: "lfx lfx-ap" });
    injectCss(root, CSS);
    const pendingBox = h("div");
    const history = h("div");
    root.append(pendingBox, history);
    el.append(root);
    let shownPrompt = "";
    let message = "";

    const draw = () => {
      const state = model.get("state") ?? {};
      const p = state.pending;
      drawHistory(state.history ?? []);
      if (!p) {
        shownPrompt = "";
        clear(pendingBox);
        if (!(state.history ?? []).length) pendingBox.append(h("div", { class: "lfx-muted", text: "No tool calls waiting for approval." }));
        return;
      }
      if (p.prompt_id === shownPrompt) return;
      shownPrompt = p.prompt_id;
      message = "";
      drawPending(p);
      model.send({ kind: KINDS.RENDERED, prompt_id: p.prompt_id });
    };

    function drawHistory(items: any[]) {
      clear(history);
      if (!items.length) return;
      const list = h("ul", { class: "lfx-ap-hist" });
      for (const d of items) {
        const note = d.note ? ` — “${d.note}”` : "";
        list.append(h("li", {},
          h("span", { class: `lfx-st lfx-st-${d.approved ? "ok" : "denied"}`, text: d.decision }), " ",
          h("b", { text: String(d.tool) }), h("span", { class: "lfx-muted", text: ` (${d.call_id}) by ${d.who} at ${d.when}${note}` })));
      }
      history.append(list);
    }

    function drawPending(p: any) {
      clear(pendingBox);
      const box = h("div", { class: "lfx-ap-pending", "data-call-id": p.call_id });
      const errorBox = h("div", { class: "lfx-err" });
      box.append(
        h("div", {}, "Tool call ", h("b", { class: "lfx-ap-tool", text: String(p.tool) }), h("span", { class: "lfx-muted", text: ` (${p.call_id})` })),
        p.description ? h("div", { class: "lfx-muted lfx-ap-desc", text: String(p.description) }) : "",
        h("div", { class: "lfx-key", text: "arguments:" }),
        h("div", { class: "lfx-ap-args" }, jsonTree(p.args ?? {})),
      );
      const always = h("input", { type: "checkbox", class: "lfx-ap-always" }) as HTMLInputElement;
      const buttons: HTMLButtonElement[] = [];
      const button = (label: string, cls: string, fn: () => void) => {
        const b = h("button", { class: cls, text: label }) as HTMLButtonElement;
        b.addEventListener("click", fn);
        buttons.push(b);
        return b;
      };
      const send = (action: string, extra: Record<string, unknown> = {}) => {
        for (const b of buttons) b.disabled = true;
        errorBox.textContent = "";
        model.send({ kind: KINDS.DECISION, prompt_id: p.prompt_id, call_id: p.call_id, action, always: always.checked, ...extra });
      };
      const editArea = h("div");
      const noteArea = h("div");
      box.append(
        h("div", {},
          button("Approve", "lfx-approve", () => send("approve")),
          button("Edit arguments…", "lfx-edit", () => {
            clear(editArea);
            const form = schemaForm(p.schema, p.args ?? {});
            editArea.append(form.el, button("Approve with these arguments", "lfx-approve-edited", () => {
              try {
                send("approve_edited", { args: form.read() });
              } catch (e) {
                errorBox.textContent = (e as Error).message;
              }
            }));
          }),
          button("Deny", "lfx-deny", () => send("deny")),
          button("Deny with note…", "lfx-deny-note-open", () => {
            clear(noteArea);
            const note = h("textarea", { rows: 2, placeholder: "Tell the model why (it continues the run)", class: "lfx-note" }) as HTMLTextAreaElement;
            noteArea.append(note, button("Send denial", "lfx-deny-note", () => send("deny_note", { note: note.value })));
          }),
          h("label", {}, always, " always allow this tool for this run"),
        ),
        editArea,
        noteArea,
        errorBox,
      );
      pendingBox.append(box);
      resultHandler = (msg: any) => {
        if (msg.prompt_id !== p.prompt_id) return;
        if (!msg.ok) {
          errorBox.textContent = String(msg.error ?? "refused");
          for (const b of buttons) b.disabled = false;
        }
      };
      if (message) errorBox.textContent = message;
    }

    let resultHandler: ((msg: any) => void) | null = null;
    const onMsg = (msg: any) => {
      if (msg?.kind === KINDS.DECISION_RESULT && resultHandler) resultHandler(msg);
    };
    model.on("msg:custom", onMsg);
    model.on("change:state", draw);
    draw();
    return () => {
      model.off("msg:custom", onMsg);
      model.off("change:state", draw);
    };
  },
};
