// Tool-approval prompt. Every decision message carries the prompt id and call id it was made
// for; the kernel accepts it only for that pending call, once (stale/second clicks are refused).
// "Always allow this tool" sits with Approve and is sent only with Approve (the kernel ignores
// it on anything else too). Cancel run stops the run that waits here; the tool never runs.
import { KINDS } from "./kinds";
import { clear, h, injectCss, jsonTree, lastUserScroll, localTime, onKernelGone, setWaiting, trySend, markLive } from "./dom";
import { SchemaForm, schemaForm } from "./schema_form";

interface Model {
  get(name: string): any;
  on(event: string, cb: (...args: any[]) => void): void;
  off(event?: string, cb?: (...args: any[]) => void): void;
  send(content: unknown): void;
}

const CSS = `
.lfx-ap{border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:4px;padding:6px 8px;background:var(--jp-layout-color0,#fff)}
.lfx-ap-pending{border-left:4px solid var(--lfx-warn,#f9ab00);padding-left:8px;margin-bottom:6px;animation:lfx-pulse 1.6s ease-in-out 3}
@keyframes lfx-pulse{0%,100%{background:transparent}50%{background:rgba(249,171,0,.18)}}
.lfx-ap-badge{display:inline-block;background:#f9ab00;color:#000;border-radius:8px;padding:0 6px;font-size:11px;margin-right:6px}
.lfx-ap-buttons{display:flex;flex-wrap:wrap;align-items:center;gap:4px;margin-top:6px}
.lfx-ap-approve{display:inline-flex;align-items:center;gap:4px;border:1px solid var(--jp-border-color2,#ccc);border-radius:4px;padding:0 4px;margin-right:6px}
.lfx-form-row{display:flex;flex-wrap:wrap;gap:6px;align-items:center;margin:3px 0}
.lfx-form-row input,.lfx-form-row textarea,.lfx-form-row select,.lfx-ap input.lfx-note{font:inherit;padding:2px 6px;border:1px solid var(--jp-border-color1,#bdbdbd);border-radius:3px;background:var(--jp-layout-color1,#fff);color:var(--jp-ui-font-color1,#222)}
.lfx-form-row input[type=text],.lfx-form-row textarea{min-width:260px}
.lfx-form-row.lfx-invalid input,.lfx-form-row.lfx-invalid textarea{border-color:var(--lfx-bad)}
.lfx-ap-note{display:flex;gap:6px;align-items:center;margin-top:4px}
.lfx-ap input.lfx-note{flex:1;min-width:320px}
.lfx-ap-hist,.lfx-ap-hist li{list-style:none;margin:0}
.lfx-ap-hist{margin-top:4px;padding-left:4px}
.lfx-ap-closed{color:#8a5a00;border-left:4px solid #8a5a00;padding-left:8px}
.lfx-ap-dock{position:fixed;right:16px;bottom:16px;z-index:1001;display:flex;flex-direction:column;gap:8px;max-width:min(640px,90vw);max-height:80vh;overflow:auto}
.lfx-ap-orphan{background:var(--jp-layout-color0,#fff);border:2px solid #f9ab00;border-radius:6px;padding:6px 8px;box-shadow:0 2px 8px rgba(0,0,0,.3)}
.lfx-ap-orphan-head{display:flex;gap:4px;align-items:baseline;margin-bottom:4px}
.lfx-ap-dock-hide{margin-left:auto;border:0;background:transparent;font-size:16px;cursor:pointer}
.lfx-ap-float{position:fixed;right:24px;bottom:24px;z-index:1000;background:#f9ab00;color:#000;border:0;border-radius:14px;padding:6px 12px;box-shadow:0 2px 6px rgba(0,0,0,.3)}
`;

const panels = new WeakMap<Model, HTMLElement>();
// The orphan panels on this page, each with what takes it away again.
const removers = new Map<HTMLElement, () => void>();

/** Is the prompt for ``callId`` drawn by a notebook output (not by an orphan panel)? Read from
 *  the page itself: the model object a view gets need not be the one ``initialize`` got.
 *  JupyterLab 4's windowing keeps a code cell that leaves the viewport in the page (hidden),
 *  so a prompt scrolled out of view still counts. A cell never drawn yet (windowing mode
 *  "full", or "defer" before its idle turn) has no output in the page: its prompt gets the
 *  panel until the cell is drawn, and the drawn output takes the panel away. */
function promptInOutput(callId: string): boolean {
  return deepQuery(document, ".lfx-ap-pending").some(
    (e) => !e.closest(".lfx-ap-dock") && e.dataset.callId === callId);
}

/** ``selector``'s matches in ``root`` and in the open shadow roots below it (marimo draws each
 *  widget output in a shadow root of its own). */
function deepQuery(root: Document | ShadowRoot, selector: string): HTMLElement[] {
  const found = Array.from(root.querySelectorAll<HTMLElement>(selector));
  for (const e of Array.from(root.querySelectorAll("*"))) {
    if (e.shadowRoot) found.push(...deepQuery(e.shadowRoot, selector));
  }
  return found;
}

/** An output drew the prompt after all (a slow page): take its orphan panel away. */
function dropOrphanPanels(): void {
  for (const [panel, remove] of removers) {
    const box = panel.querySelector<HTMLElement>(".lfx-ap-pending");
    if (box?.dataset.callId && promptInOutput(box.dataset.callId)) remove();
  }
}
const ORPHAN_DELAY_MS = 1500;

/** A page (re)loaded while a prompt waits, from a notebook file that does not hold the
 *  prompt's output (reloaded before a save): no output draws this model, so nothing would show
 *  the prompt, yet the kernel still holds it and the run still waits. Then the prompt is drawn
 *  in a panel of its own, with working buttons (and the title cue); × only hides the panel. */
function checkOrphan(model: Model): void {
  const pending = model.get("state")?.pending;
  if (panels.has(model) || !pending) return;
  if (promptInOutput(String(pending.call_id))) return;
  let dock = document.querySelector<HTMLElement>(".lfx-ap-dock");
  if (!dock) {
    dock = h("div", { class: "lfx-ap-dock" });
    document.body.append(dock);
  }
  const hide = h("button", { class: "lfx-ap-dock-hide", text: "×", title: "Hide this panel (the run keeps waiting)" });
  const body = h("div");
  const panel = h("div", { class: "lfx-ap-orphan" },
    h("div", { class: "lfx-ap-orphan-head" },
      h("b", { text: "⏳ A run waits for this approval" }),
      h("span", { class: "lfx-muted", text: " — its cell's output is not on this page (the notebook was not saved before it was reloaded, or the cell is not drawn yet)" }),
      hide),
    body);
  dock.append(panel);
  panels.set(model, panel);
  const cleanup = draw(model, body);
  const remove = () => {
    cleanup();
    panel.remove();
    removers.delete(panel);
  };
  hide.addEventListener("click", remove);
  removers.set(panel, remove);
}

function draw(model: Model, el: HTMLElement): () => void {
    const root = h("div", { class: "lfx lfx-ap" });
    injectCss(root, CSS);
    const pendingBox = h("div");
    const history = h("div");
    root.append(pendingBox, history);
    el.append(root);
    markLive(el);
    lastUserScroll(); // start noticing the user's own scrolling
    let shownPrompt = "";
    let closed = "";
    let floatButton: HTMLElement | null = null;

    const dropFloat = () => {
      floatButton?.remove();
      floatButton = null;
    };

    const close = (why: string) => {
      if (closed) return;
      closed = why;
      if (shownPrompt) setWaiting(shownPrompt, false);
      dropFloat();
      const p = model.get("state")?.pending;
      clear(pendingBox);
      pendingBox.append(h("div", { class: "lfx-ap-closed" },
        h("b", { text: why }),
        p ? h("span", { text: ` — tool call ${p.tool} (${p.call_id}) was not run from this prompt.` }) : ""));
    };

    const draw = () => {
      if (closed) return;
      const state = model.get("state") ?? {};
      const p = state.pending;
      drawHistory(state.history ?? [], state.notice);
      if (!p) {
        if (shownPrompt) setWaiting(shownPrompt, false);
        dropFloat();
        shownPrompt = "";
        clear(pendingBox);
        if (!(state.history ?? []).length) pendingBox.append(h("div", { class: "lfx-muted", text: "No tool calls waiting for approval." }));
        return;
      }
      if (p.prompt_id === shownPrompt) return;
      if (shownPrompt) setWaiting(shownPrompt, false);
      shownPrompt = p.prompt_id;
      drawPending(p);
      setWaiting(p.prompt_id, true);
      if (!trySend(model, { kind: KINDS.RENDERED, prompt_id: p.prompt_id })) close("kernel restarted — this prompt is closed");
    };

    function drawHistory(items: any[], notice: string | null | undefined) {
      clear(history);
      if (!items.length && !notice) return;
      const list = h("ul", { class: "lfx-ap-hist" });
      for (const d of items) {
        const note = d.note ? ` — “${d.note}”` : "";
        const when = localTime(d.when);
        const waited = typeof d.waited_s === "number" ? `, after ${d.waited_s.toFixed(1)} s` : "";
        list.append(h("li", {},
          h("span", { class: `lfx-st lfx-st-${d.approved ? "ok" : d.decision === "cancelled" ? "cancelled" : "denied"}`, text: d.decision }), " ",
          h("b", { text: String(d.tool) }),
          h("span", { class: "lfx-muted", text: ` (${d.call_id}) by ${d.who}${when ? ` at ${when}` : ""}${waited}${note}` })));
      }
      history.append(list);
      if (notice) history.append(h("div", { class: "lfx-err lfx-ap-notice", text: String(notice) }));
    }

    function bringIntoView(box: HTMLElement) {
      // Respect the user's own scrolling: if they moved in the last few seconds, offer a
      // button instead of yanking the page.
      if (Date.now() - lastUserScroll() > 3000) {
        box.scrollIntoView({ block: "center" });
        return;
      }
      dropFloat();
      floatButton = h("button", { class: "lfx-ap-float", text: "⏳ Tool approval waiting — show" });
      floatButton.addEventListener("click", () => {
        box.scrollIntoView({ block: "center" });
        dropFloat();
      });
      document.body.append(floatButton);
    }

    function drawPending(p: any) {
      clear(pendingBox);
      const box = h("div", { class: "lfx-ap-pending", "data-call-id": p.call_id });
      const errorBox = h("div", { class: "lfx-err lfx-ap-error" });
      box.append(
        h("div", {}, h("span", { class: "lfx-ap-badge", text: "waiting for approval" }), "Tool call ",
          h("b", { class: "lfx-ap-tool", text: String(p.tool) }), h("span", { class: "lfx-muted", text: ` (${p.call_id})` })),
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
      const send = (content: Record<string, unknown>) => {
        for (const b of buttons) b.disabled = true;
        errorBox.textContent = "";
        if (!trySend(model, { prompt_id: p.prompt_id, call_id: p.call_id, ...content })) close("kernel restarted — this prompt is closed");
      };
      const decide = (action: string, extra: Record<string, unknown> = {}) => send({ kind: KINDS.DECISION, action, ...extra });
      const editArea = h("div");
      const noteArea = h("div");
      let form: SchemaForm | null = null;
      box.append(
        h("div", { class: "lfx-ap-buttons" },
          // "always" belongs to Approve: the box and the button are one group
          h("span", { class: "lfx-ap-approve" },
            button("Approve", "lfx-approve lfx-primary", () => decide("approve", { always: always.checked })),
            h("label", { title: "Approve this call and every later call of this tool in this run" }, always, " always allow this tool for this run")),
          button("Edit arguments…", "lfx-edit", () => {
            clear(editArea);
            const edit = schemaForm(p.schema, p.args ?? {});
            form = edit;
            editArea.append(edit.el, button("Approve with these arguments", "lfx-approve-edited lfx-primary", () => {
              try {
                decide("approve_edited", { args: edit.read() });
              } catch (e) {
                // shown at the field (schema_form marks it); the box below only if no field did
                if (!edit.el.querySelector(".lfx-field-error:not(:empty)")) errorBox.textContent = (e as Error).message;
              }
            }));
          }),
          button("Deny", "lfx-deny lfx-danger", () => decide("deny")),
          button("Deny with note…", "lfx-deny-note-open lfx-danger", () => {
            clear(noteArea);
            const note = h("input", { type: "text", placeholder: "Tell the model why (it continues the run)", class: "lfx-note", "aria-label": "note for the model" }) as HTMLInputElement;
            noteArea.append(h("div", { class: "lfx-ap-note" }, note, button("Send denial", "lfx-deny-note lfx-danger", () => decide("deny_note", { note: note.value }))));
            note.focus();
          }),
          button("Cancel run", "lfx-cancel", () => send({ kind: KINDS.CANCEL })),
        ),
        editArea,
        noteArea,
        errorBox,
      );
      pendingBox.append(box);
      resultHandler = (msg: any) => {
        if (msg.prompt_id !== p.prompt_id) return;
        if (!msg.ok) {
          // the kernel's validation names fields: each error at its field, the rest below
          const rest = form && Array.isArray(msg.field_errors) ? form.showErrors(msg.field_errors) : null;
          errorBox.textContent = rest ? rest.join("\n") : String(msg.error ?? "refused");
          for (const b of buttons) b.disabled = false;
        }
      };
      requestAnimationFrame(() => bringIntoView(box));
    }

    let resultHandler: ((msg: any) => void) | null = null;
    const onMsg = (msg: any) => {
      if (msg?.kind === KINDS.DECISION_RESULT && resultHandler) resultHandler(msg);
    };
    model.on("msg:custom", onMsg);
    model.on("change:state", draw);
    const stopWatching = onKernelGone(el, model, () => close("kernel restarted — this prompt is closed"));
    draw();
    return () => {
      if (shownPrompt) setWaiting(shownPrompt, false);
      dropFloat();
      stopWatching();
      model.off("msg:custom", onMsg);
      model.off("change:state", draw);
    };
}

export default {
  initialize({ model }: { model: Model }) {
    setTimeout(() => checkOrphan(model), ORPHAN_DELAY_MS);
    model.on("change:state", () => setTimeout(() => checkOrphan(model), ORPHAN_DELAY_MS));
  },
  render({ model, el }: { model: Model; el: HTMLElement }) {
    const cleanup = draw(model, el);
    setTimeout(dropOrphanPanels, 0); // once the view is in the page
    return cleanup;
  },
};
