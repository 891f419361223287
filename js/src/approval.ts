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
.lfx-ap{border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:4px;padding:6px 8px;background:var(--jp-layout-color0,#fff)}
.lfx-ap-pending{border-left:3px solid var(--lfx-warn);padding-left:8px;margin-bottom:6px}
.lfx-ap-buttons{display:flex;flex-wrap:wrap;align-items:center;gap:4px;margin-top:6px}
.lfx-ap-buttons label{margin-left:8px}
.lfx-form-row{display:flex;flex-wrap:wrap;gap:6px;align-items:center;margin:3px 0}
.lfx-form-row input,.lfx-form-row textarea,.lfx-form-row select,.lfx-ap input.lfx-note{font:inherit;padding:2px 6px;border:1px solid var(--jp-border-color1,#bdbdbd);border-radius:3px;background:var(--jp-layout-color1,#fff);color:var(--jp-ui-font-color1,#222)}
.lfx-form-row input[type=text],.lfx-form-row textarea{min-width:260px}
.lfx-form-row.lfx-invalid input,.lfx-form-row.lfx-invalid textarea{border-color:var(--lfx-bad)}
.lfx-ap-note{display:flex;gap:6px;align-items:center;margin-top:4px}
.lfx-ap input.lfx-note{flex:1;min-width:320px}
.lfx-ap-hist,.lfx-ap-hist li{list-style:none;margin:0}
.lfx-ap-hist{margin-top:4px;padding-left:4px}
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
        h("div", { class: "lfx-ap-buttons" },
          button("Approve", "lfx-approve lfx-primary", () => send("approve")),
          button("Edit arguments…", "lfx-edit", () => {
            clear(editArea);
            const form = schemaForm(p.schema, p.args ?? {});
            editArea.append(form.el, button("Approve with these arguments", "lfx-approve-edited lfx-primary", () => {
              try {
                send("approve_edited", { args: form.read() });
              } catch (e) {
                // shown at the field (schema_form marks it); the box below only if no field did
                if (!form.el.querySelector(".lfx-field-error:not(:empty)")) errorBox.textContent = (e as Error).message;
              }
            }));
          }),
          button("Deny", "lfx-deny lfx-danger", () => send("deny")),
          button("Deny with note…", "lfx-deny-note-open lfx-danger", () => {
            clear(noteArea);
            const note = h("input", { type: "text", placeholder: "Tell the model why (it continues the run)", class: "lfx-note", "aria-label": "note for the model" }) as HTMLInputElement;
            noteArea.append(h("div", { class: "lfx-ap-note" }, note, button("Send denial", "lfx-deny-note lfx-danger", () => send("deny_note", { note: note.value }))));
            note.focus();
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
