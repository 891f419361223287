// TraceExplorer view: a virtualized tree (only rows on screen are in the DOM) with a timeline
// (waterfall) column on a shared time axis, a filter that keeps ancestors of matches, a
// resizable / maximizable detail pane built for reading, keyboard navigation, and view state
// (selection, expansion, filter, layout) kept in the `view_state` trait so a reload restores
// it. The page never holds the tree: each view asks the kernel for the window of rows on
// screen (a live trace's windows are pushed again as it changes) and for a selected node's
// full record.
import { KINDS } from "./kinds";
import { Child, asText, chatView, copyButton, decodeState, errorBox, errorCopyText, fmtDuration, h, injectCss, localTime, markLive, messageTurns, onKernelGone, plural, readable, requestAt, totalCostText, trySend } from "./dom";
import { BAR_LIMIT, BUCKETS, GROUPS, Zoom, barPlace, visibleRange, zoomBy } from "./timeline";
import { BAD, RowWindow, TraceNode, WindowReply, WindowRow, argChanges, durationMs, humanWait, isLive, rollupOf, rowValuesOf, windowRange } from "./tree";

const ROW_H = 22;
const MAIN_H = 440;
/** Rows asked for beyond what is on screen (scrolling stays local). */
const MARGIN = 60;
/** How long a window request may go unanswered before the page asks again. */
const WINDOW_WAIT_MS = 3000;
/** Window requests of every view on the page, numbered in order (a reply names its own). */
let windowRequests = 0;

/** The layout a view keeps (`view_state.view`: the timeline column shown, the detail pane
 *  maximized, the timeline's visible range or null for the whole trace), from a saved one:
 *  defaults for what is missing or wrong. */
function layoutOf(v: Record<string, any>) {
  const z = v.zoom;
  const zoomOk = Array.isArray(z) && z.length === 2 && z.every(Number.isFinite) && z[0] <= z[1];
  return { timeline: v.timeline !== false, max: !!v.max, zoom: (zoomOk ? [z[0], z[1]] : null) as Zoom };
}

const CSS = `
.lfx-te{border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:4px;background:var(--jp-layout-color0,#fff);container-type:inline-size}
.lfx-te-bar{display:flex;flex-wrap:wrap;gap:6px 8px;align-items:center;padding:4px 6px;border-bottom:1px solid var(--jp-border-color2,#e0e0e0)}
.lfx-te-bar input{flex:1 1 220px;min-width:160px;font:inherit;padding:2px 6px;border:1px solid var(--jp-border-color1,#bdbdbd);border-radius:3px;background:var(--jp-layout-color1,#fff);color:var(--jp-ui-font-color1,#222)}
.lfx-te-tools{display:flex;gap:4px;margin-left:auto}
.lfx-te-main{display:flex;height:${MAIN_H}px;min-height:160px;overflow:hidden;resize:vertical}
.lfx-te-left{display:flex;flex-direction:column;min-width:0;flex:0 0 62%;container-type:inline-size}
.lfx-te-head,.lfx-te-row{display:flex;align-items:center;gap:6px;white-space:nowrap;box-sizing:border-box;padding-right:6px}
.lfx-te-head{height:20px;font-size:11px;color:var(--jp-ui-font-color2,#757575);border-bottom:1px solid var(--jp-border-color2,#e0e0e0);padding-left:22px;scrollbar-gutter:stable;overflow:hidden}
.lfx-te-scroll{flex:1;overflow:auto;position:relative;outline:none;scrollbar-gutter:stable}
.lfx-te-scroll:focus-visible{box-shadow:inset 0 0 0 2px var(--jp-brand-color1,#2196f3)}
.lfx-te-row{position:absolute;left:0;right:0;height:${ROW_H}px;cursor:pointer}
.lfx-te-row:hover{background:var(--jp-layout-color2,#eee)}
.lfx-te-bar button[aria-pressed=true],.lfx-te-row.lfx-sel{background:var(--jp-layout-color3,#bdbdbd);color:var(--jp-ui-font-color0,#000);box-shadow:inset 3px 0 0 var(--jp-brand-color1,#2196f3)}
.lfx-te .lfx-te-below{color:var(--lfx-bad,#b3261e);font-size:11px;margin-left:6px;white-space:nowrap}
.lfx-te-row.lfx-sel *{color:var(--jp-ui-font-color0,#000)}
.lfx-te-row.lfx-match .lfx-te-name{text-decoration:underline dotted}
.lfx-te-caret{width:14px;text-align:center;flex:none}
.lfx-te-kind{font-size:10px;border:1px solid var(--jp-border-color1,#bdbdbd);border-radius:3px;padding:0 3px;flex:none}
.lfx-te-label{overflow:hidden;text-overflow:ellipsis;flex:1 1 auto;min-width:40px}
.lfx-te-label>span+span{margin-left:6px;color:var(--jp-ui-font-color2,#757575)}
.lfx-te-c{flex:none;text-align:right;font-size:11px;font-variant-numeric:tabular-nums}
.lfx-te-c-st{width:64px;text-align:center}
.lfx-te-c-st .lfx-st{min-width:56px}
.lfx-te-c-dur,.lfx-te-c-cost{width:52px}
.lfx-te-c-tok{width:58px}
.lfx-te-c-tl{width:22cqi;min-width:70px;position:relative;height:12px;text-align:left;overflow:hidden}
@container (max-width: 620px){.lfx-te-c-tok,.lfx-te-c-cost{display:none}}
@container (max-width: 420px){.lfx-te-c-tl{display:none}}
.lfx-te-nol .lfx-te-c-tl,.lfx-te-nol .lfx-te-ov,.lfx-te-nol .lfx-te-zoom{display:none}
.lfx-te-bar-tl,.lfx-te-ov-b span{background:var(--lfx-c,color-mix(in srgb,var(--jp-ui-font-color1,#222) 45%,transparent))}
.lfx-te-bar-tl{position:absolute;top:1px;height:10px;min-width:2px;border-radius:2px;opacity:.9}
.lfx-te-bar-tl.k-query,.lfx-te-ov-b .g-running{--lfx-c:var(--lfx-run)}
.lfx-te-bar-tl.k-tool_call{--lfx-c:var(--lfx-warn)}
.lfx-te-bar-tl.k-log{--lfx-c:var(--jp-ui-font-color2,#757575);width:2px!important}
.lfx-te-bar-tl.s-failed,.lfx-te-bar-tl.s-timed_out,.lfx-te-ov-b .g-failed{--lfx-c:var(--lfx-bad)}
.lfx-te-bar-tl.s-denied,.lfx-te-bar-tl.s-cancelled{background:repeating-linear-gradient(45deg,var(--lfx-warn) 0 3px,transparent 3px 6px);outline:1px solid var(--lfx-warn)}
.lfx-te-bar-tl.s-running{opacity:.55}
.lfx-te-bar-tl.s-suspended{--lfx-c:var(--lfx-paused)}
.lfx-te-bar-tl.w-human{background:repeating-linear-gradient(90deg,var(--lfx-warn) 0 2px,transparent 2px 4px)}
.lfx-te-axis{display:flex;justify-content:space-between;height:auto}
.lfx-te-ov{height:26px;cursor:default}
.lfx-te-ov .lfx-te-c-tl{height:22px;display:flex;align-items:flex-end;border-bottom:1px solid var(--jp-border-color2,#e0e0e0)}
.lfx-te-ov-b{flex:1 1 0;display:flex;flex-direction:column-reverse;min-width:0;height:100%}
.lfx-te-ov-b span{display:block;flex:none}
.lfx-te-detail{flex:1;min-width:0;padding:6px 10px;overflow:auto;box-sizing:border-box;border-left:1px solid var(--jp-border-color2,#e0e0e0)}
.lfx-te-detail h4{display:flex;align-items:center;justify-content:space-between;gap:6px;margin:10px 0 3px 0;font-size:12px}
.lfx-te.lfx-max .lfx-te-left{display:none}
.lfx-te.lfx-max .lfx-te-main{min-height:560px}
@container (width < 760px){.lfx-te-main{flex-direction:column}.lfx-te-left{flex:0 0 50%}.lfx-te-detail{border-left:0;border-top:1px solid var(--jp-border-color2,#e0e0e0)}}
.lfx .lfx-st-waiting_for_approval{background:var(--lfx-warn,#f9ab00);color:#000}
.lfx-te-closed{background:rgba(249,171,0,.15);color:var(--jp-ui-font-color1,#8a5a00);padding:2px 6px}
`;

// A node's fields the detail pane shows in its own way; any other field follows them.
const SHOWN_KEYS = new Set(["id", "parent_id", "kind", "name", "status", "start", "end", "cost", "partial", "hint", "error", "inputs", "outputs", "decision", "usage"]);

/** Benchmarks set `globalThis.__lfxTimings = []` to get where time goes: how long a step took
 *  (`since`: when it started), else when it happened (ms since the epoch, labelled `@label`). */
function timing(label: string, since?: number): void {
  const t = (globalThis as any).__lfxTimings;
  if (!Array.isArray(t)) return;
  t.push(since === undefined ? [`@${label}`, Date.now()] : [label, Math.round((performance.now() - since) * 10) / 10]);
}

/** A query node as a conversation: its system message, the prompt as sent, the answer (with
 *  any tool calls). Null for other nodes or when the record has no prompt. */
export function conversation(node: TraceNode): unknown[] | null {
  const inp = node.inputs as Record<string, any> | undefined;
  const out = node.outputs as Record<string, any> | undefined;
  if (node.kind !== "query" || !inp || typeof inp !== "object") return null;
  const turns: unknown[] = [];
  const system = inp.options?.system_message ?? inp.system_message;
  if (typeof system === "string" && system) turns.push({ role: "system", text: system });
  // a protocol's prompt holds its instructions and example first: open on the user's request
  const template = typeof inp.prompt === "string" ? inp.prompt : "";
  const sent = messageTurns(inp.rendered_prompt ?? inp.messages ?? inp.prompt);
  if (sent) turns.push(...sent.turns.map((t) => (t.role === "user" && typeof t.text === "string" && template ? { ...t, open_at: requestAt(t.text, template) } : t)));
  else if (typeof inp.prompt === "string") turns.push({ role: "user", text: inp.prompt });
  if (out && typeof out === "object") {
    // the model's reasoning, when the trace kept it, as its own block before the answer
    for (const r of [out.reasoning ?? []].flat()) {
      const text = typeof r === "string" ? r : r?.redacted ? "(redacted by the provider)" : String(r?.text ?? "");
      if (text) turns.push({ role: "reasoning", text });
    }
    const answer = messageTurns(out.response ?? out.message);
    if (answer) turns.push(...answer.turns);
    else if (typeof out.text === "string" || Array.isArray(out.tool_calls)) turns.push({ role: "assistant", text: out.text ?? "", tool_calls: out.tool_calls });
  }
  return turns.length ? turns : null;
}

export default {
  render({ model, el }: { model: any; el: HTMLElement }) {
    timing("initialize");
    // -- the page ----------------------------------------------------------------------------
    // JupyterLab's own shortcuts (↑/↓ move between cells…) stay out of the explorer's keys
    const root = h("div", { class: "lfx lfx-te", "data-lm-suppress-shortcuts": "true" });
    injectCss(root, CSS);
    const title = h("b", { text: model.get("title") || "Trace" });
    const search = h("input", { type: "search", class: "lfx-te-filter", placeholder: "filter: name, kind, status, message, error…  ( / )" }) as HTMLInputElement;
    const summary = h("span", { class: "lfx-muted lfx-te-summary" });
    const badge = h("span", { class: "lfx-st lfx-st-waiting_for_approval lfx-te-badge", style: "display:none" });
    const closedBar = h("div", { class: "lfx-te-closed", style: "display:none" });
    /** A bar button that does `act` when clicked. */
    const button = (cls: string, text: string, tip: string, act: () => void) => {
      const b = h("button", { class: `lfx-btn ${cls}`, type: "button", text, title: tip }) as HTMLButtonElement;
      b.addEventListener("click", act);
      return b;
    };
    const cancelButton = button("lfx-te-cancel", "Cancel run", "Cancel the run this trace follows; a tool waiting for approval does not run", () => {
      cancelButton.disabled = true;
      if (!trySend(model, { kind: KINDS.CANCEL })) closeAll();
      setTimeout(() => (cancelButton.disabled = false), 2000);
    });
    cancelButton.style.display = "none";
    const zoomOut = button("lfx-te-zoom lfx-te-zout", "−", "Zoom the timeline out", () => setZoom(zoomBy(fullSpan(), layout.zoom, 2)));
    const zoomIn = button("lfx-te-zoom lfx-te-zin", "+", "Zoom the timeline in (or the wheel over the overview strip, around the pointer)", () => setZoom(zoomBy(fullSpan(), layout.zoom, 0.5)));
    const zoomReset = button("lfx-te-zoom lfx-te-zreset", "⟲", "Show the whole trace on the timeline", () => setZoom(null));
    const timelineBtn = button("lfx-te-tl-toggle", "Timeline", "Show or hide the timeline column", () => {
      layout.timeline = !layout.timeline;
      changed();
    });
    const maxBtn = button("lfx-te-max", "⤢ Details", "Maximize the details (Enter / Esc)", () => toggleMax());
    /** The aligned columns of the header, the overview strip and each row: [column, text,
     *  content, tooltip]. */
    const cols = (...specs: [string, string, Child?, string?][]) =>
      specs.map(([col, text, child, tip]) => h("span", { class: `lfx-te-c lfx-te-c-${col}`, text, title: tip }, child));
    const axis = h("span", { class: "lfx-te-c lfx-te-c-tl lfx-te-axis" });
    const head = h("div", { class: "lfx-te-head" }, h("span", { class: "lfx-te-label", text: "name" }), ...cols(
      ["st", "status"],
      ["dur", "duration"],
      ["tok", "tokens Σ", null, "this node and all below it"],
      ["cost", "cost Σ", null, "this node and all below it; — when no price is known"],
    ), axis);
    const ovLabel = h("span", { class: "lfx-te-label lfx-muted" });
    const ovCell = h("span", { class: "lfx-te-c lfx-te-c-tl" });
    const ov = h("div", { class: "lfx-te-head lfx-te-ov" }, ovLabel, ...cols(["st", ""], ["dur", ""], ["tok", ""], ["cost", ""]), ovCell);
    const scroll = h("div", { class: "lfx-te-scroll", role: "tree", tabindex: 0, "aria-label": "trace tree" });
    const spacer = h("div", { style: "position:relative;width:100%" });
    const empty = h("div", { class: "lfx-te-empty lfx-muted", style: "display:none;padding:12px" });
    scroll.append(spacer, empty);
    const detail = h("div", { class: "lfx-te-detail", tabindex: -1 });
    const main = h("div", { class: "lfx-te-main" }, h("div", { class: "lfx-te-left" }, head, ov, scroll), detail);
    root.append(h("div", { class: "lfx-te-bar" }, title, search, badge, summary, h("span", { class: "lfx-te-tools" }, cancelButton, zoomOut, zoomIn, zoomReset, timelineBtn, maxBtn)), closedBar, main);
    el.append(root);
    markLive(el);

    // -- what this view shows (from the kernel), and the reader's choices --------------------
    let win = new RowWindow();
    let span: [number, number] = [Infinity, -Infinity]; // the trace's time axis
    let totals: Record<string, any> | null = null; // the session's totals (cost, unpriced calls)
    let offset: number | null = null; // wall-clock seconds minus trace seconds
    let ended = false; // the trace is over (a saved trace, a disposed session)
    let seq = -1; // the newest state adopted
    let closed = ""; // set once the kernel is gone: why live updates stopped
    /** Nothing shown can still run: the trace ended or the kernel is gone. */
    const over = () => ended || closed !== "";
    const details = new Map<string, TraceNode | null>(); // full records (null: asked for)
    let detailsVersion = 0;
    let selected: string | null = null;
    let query = "";
    const expanded = new Map<string, boolean>();
    let layout = layoutOf({});
    let searchTimer: ReturnType<typeof setTimeout> | undefined;
    let saveTimer: ReturnType<typeof setTimeout> | undefined;

    /** The trace-wide values a state or a live window carries. */
    function adoptExtras(x: Record<string, any>): void {
      if (Array.isArray(x.span)) span = [x.span[0], x.span[1]];
      if (x.summary !== undefined) totals = x.summary ?? null;
      if (typeof x.offset === "number") offset = x.offset;
      ended = x.ended === true;
    }
    /** A state from the kernel: the first window of the default view ("" below: for no view
     *  yet, so every view asks for its own) and the trace-wide values. */
    function applyState(state: any): void {
      if (!state?.windowed || typeof state.windowed !== "object") return;
      if (typeof state.seq === "number") seq = state.seq;
      win = new RowWindow(state.windowed);
      span = [Infinity, -Infinity];
      totals = null;
      adoptExtras(state);
    }
    const newer = (state: any) => typeof state?.seq === "number" && state.seq > seq;
    /** The reader's choices from a saved view state (the rest start afresh). */
    function restoreView(saved: any): void {
      const v = saved && typeof saved === "object" ? saved : {};
      selected = typeof v.selected === "string" ? v.selected : null;
      query = typeof v.query === "string" ? v.query : "";
      expanded.clear();
      for (const e of Array.isArray(v.expanded) ? v.expanded : []) if (Array.isArray(e) && typeof e[0] === "string") expanded.set(e[0], !!e[1]);
      if (v.view && typeof v.view === "object") layout = layoutOf(v.view);
      clearTimeout(searchTimer);
      search.value = query;
    }
    function saveView(): void {
      clearTimeout(saveTimer);
      saveTimer = setTimeout(() => {
        model.set("view_state", { selected, query, expanded: [...expanded.entries()], view: { ...layout } });
        model.save_changes();
      }, 300);
    }
    applyState(decodeState(model.get("state")));
    restoreView(model.get("view_state"));

    // A state newer than the one shown is adopted, whether it came as the trait or a message.
    const onState = () => {
      const state = decodeState(model.get("state"));
      if (newer(state)) applyState(state);
      schedule();
    };
    const onMessage = (msg: any, buffers?: any[]) => {
      const kind = msg?.kind;
      if (kind === KINDS.WINDOW) onWindow(msg as WindowReply);
      else if (kind === KINDS.DETAIL && msg.node) {
        details.set(String(msg.id), { ...msg.node, id: String(msg.id) });
        detailsVersion++;
      } else if (kind === KINDS.SNAPSHOT || kind === KINDS.SHOW) {
        const state = { ...decodeState(buffers?.[0]), seq: msg.seq };
        if (kind === KINDS.SHOW && state.windowed) {
          // another trace in place (TraceExplorer.show): the reader's choices start afresh
          timing("show");
          pending = null; // a window of the trace shown before
          details.clear();
          restoreView(msg.view_state);
          seq = -1;
        }
        if (newer(state)) applyState(state);
      }
      schedule();
    };
    model.on("change:state", onState);
    model.on("msg:custom", onMessage);

    let frame = 0;
    const schedule = () => {
      if (!frame) frame = requestAnimationFrame(draw);
    };
    /** The reader changed the view: ask for its rows now (not a frame later), draw it, save it. */
    function changed(): void {
      ensureWindow(...onScreen());
      schedule();
      saveView();
    }
    function toggle(id: string, open: boolean): void {
      expanded.set(id, open);
      changed();
    }
    function setZoom(zoom: Zoom): void {
      layout.zoom = zoom;
      changed();
    }
    const onScreen = () => windowRange(scroll.scrollTop, scroll.clientHeight || MAIN_H, ROW_H, win.reply.total);
    /** The whole trace's time axis (at least 1 ms long). */
    const fullSpan = (): [number, number] => (Number.isFinite(span[0]) ? [span[0], Math.max(span[1], span[0] + 1e-3)] : [0, 1]);
    const timeSpan = () => visibleRange(fullSpan(), layout.zoom);

    // -- windows of rows: asked of the kernel for the rows on screen plus a margin ----------
    // One request in flight at a time: a scroll or toggle meanwhile waits for its reply (or,
    // when none comes, a timer), whose draw asks for where the view is then, so the page ends
    // on the rows of its last position. A reply to any other request is dropped.
    let pending: { req: number; key: string; selected: string | null; until: number } | null = null;
    let applied = 0; // the request the window held answers (a live push repeats it)
    let retry: ReturnType<typeof setTimeout> | undefined;
    let revealWanted = false; // show the selection once the kernel says where it is
    let goWanted: number | null = null; // select this row once its window arrives
    /** This view's name in its requests: a live trace's pushes say which view they are for. */
    const viewId = Math.random().toString(36).slice(2);
    /** What a window is computed for: filter, expansion and the timeline overview's range. */
    const wantKey = () => JSON.stringify([query.trim().toLowerCase(), [...expanded.entries()], !layout.timeline ? "" : layout.zoom ? timeSpan() : "whole"]);
    function ensureWindow(a: number, b: number): void {
      const key = wantKey();
      if (win.covers(a, b, key) && !(revealWanted && win.selected !== selected)) return;
      const now = performance.now();
      if (pending && now < pending.until) return;
      const req = ++windowRequests;
      const from = Math.max(0, a - MARGIN);
      const timeline = layout.timeline ? [...(layout.zoom ? timeSpan() : [null, null]), BUCKETS] : undefined;
      const sent = trySend(model, { kind: KINDS.WINDOW_REQUEST, req, view: viewId, start: from, count: b - from + MARGIN, query, expanded: [...expanded.entries()], selected, timeline });
      const wait = sent ? WINDOW_WAIT_MS : 500; // not sent: the comm is not ready yet
      pending = { req, key, selected, until: now + wait };
      clearTimeout(retry);
      retry = setTimeout(schedule, wait + 10);
    }
    function onWindow(reply: WindowReply): void {
      // a live push repeats the request this view's window answers, with what changed
      const push = typeof reply.view === "string";
      const asked = push ? null : pending;
      if (push ? reply.view !== viewId || reply.req !== applied : !asked || reply.req !== asked.req) return;
      if (reply.live) {
        adoptExtras(reply);
        // a record fetched before its node changed (it ended, an approval came) is asked again
        for (const { node } of reply.rows) {
          const held = details.get(String(node.id));
          if (held && (held.status !== node.status || (held.end ?? null) !== (node.end ?? null))) details.delete(String(node.id));
        }
      }
      const { key, selected: shownFor } = asked ?? win;
      win = new RowWindow(reply, key, shownFor);
      if (!asked) return schedule();
      pending = null;
      applied = asked.req;
      // the rows the reader waits for: drawn now, so the coming frame shows them
      cancelAnimationFrame(frame);
      draw();
    }
    /** Keyboard moves that waited for the kernel: a row to select, a selection to show. */
    function follow(): void {
      const id = goWanted === null ? undefined : win.at(goWanted)?.node.id;
      if (id !== undefined) {
        goWanted = null;
        select(id, true);
      }
      if (revealWanted && win.selected === selected) {
        revealWanted = false;
        const i = win.indexOf(selected);
        if (i >= 0) reveal(i);
      }
    }

    // -- drawing -----------------------------------------------------------------------------
    function draw(): void {
      frame = 0;
      const t0 = performance.now();
      root.classList.toggle("lfx-te-nol", !layout.timeline);
      root.classList.toggle("lfx-max", layout.max);
      timelineBtn.setAttribute("aria-pressed", String(layout.timeline));
      maxBtn.setAttribute("aria-pressed", String(layout.max));
      maxBtn.textContent = layout.max ? "⤡ Tree" : "⤢ Details";
      follow();
      spacer.style.height = `${win.reply.total * ROW_H}px`;
      const [start, end] = onScreen();
      ensureWindow(start, end);
      const [lo, hi] = timeSpan();
      const at = (t: number) => fmtDuration((t - fullSpan()[0]) * 1000) || "0";
      axis.replaceChildren(...(layout.timeline ? [h("span", { text: at(lo) }), h("span", { text: at(hi) })] : []));
      axis.title = layout.zoom ? "the zoomed range of the trace (⟲ shows all of it)" : "the whole trace";
      zoomOut.disabled = zoomReset.disabled = !layout.zoom;
      drawOverview();
      drawRows(start, end, lo, hi);
      drawBar();
      drawDetail();
      timing("draw", t0);
      timing("drawn");
      // benchmarks set `globalThis.__lfxTraceHook` to hear of each draw (when, how many nodes)
      (globalThis as any).__lfxTraceHook?.({ renderedAt: Date.now(), nodes: win.reply.nodes });
    }

    let overviewFor = "";
    /** The strip above the rows: counts per time bucket when the range holds more nodes
     *  than bars can show, else the number of nodes in range (the rows show their bars). */
    function drawOverview(): void {
      const o = win.reply.timeline;
      const key = JSON.stringify([o, span[0]]);
      if (!layout.timeline || key === overviewFor) return;
      overviewFor = key;
      const many = !!o && o.in_range > BAR_LIMIT;
      const n = (k: number) => k.toLocaleString("en-US");
      // nodes starting outside the range, or with no time, are counted apart: the counts add up
      const parts = o && [`${n(o.in_range)} nodes start in this range${many ? " (counts by start time)" : " (bars below)"}`, o.before && `${n(o.before)} before`, o.after && `${n(o.after)} after`, o.untimed && `${n(o.untimed)} with no time`];
      ovLabel.textContent = ovLabel.title = parts ? parts.filter(Boolean).join(" · ") : "timeline: counting…";
      ovCell.style.visibility = many ? "" : "hidden";
      ovCell.replaceChildren();
      if (!o || !many) return;
      const width = (o.hi - o.lo) / o.buckets;
      const sums = Array.from({ length: o.buckets }, (_, b) => GROUPS.map((g) => o.counts[g]?.[b] ?? 0));
      const top = Math.max(1, ...sums.map((per) => per[0] + per[1] + per[2]));
      const time = (t: number) => fmtDuration(t * 1000) || "0 ms";
      sums.forEach((per, b) => {
        const t = o.lo + width * b - span[0];
        const tip = `${n(per[0] + per[1] + per[2])} nodes start at ${time(t)}–${time(t + width)}: ${GROUPS.map((g, k) => `${n(per[k])} ${g}`).join(" · ")}`;
        ovCell.append(h("span", { class: "lfx-te-ov-b", title: tip }, ...GROUPS.map((g, k) => h("span", { class: `g-${g}`, style: `height:${(per[k] / top) * 100}%` }))));
      });
    }

    const pool: HTMLElement[] = [];
    function drawRows(start: number, end: number, lo: number, hi: number): void {
      // the state's window lists the trace with no filter and nothing toggled: a view with
      // other choices (restored, or given to `show`) waits for its own rows, not the wrong tree
      const stale = win.key === "" && (query.trim() !== "" || expanded.size > 0);
      for (let i = start; i < end; i++) {
        const div = (pool[i - start] ??= spacer.appendChild(h("div", { class: "lfx-te-row", role: "treeitem" })));
        div.style.top = `${i * ROW_H}px`;
        div.style.display = "";
        const row = stale ? undefined : win.at(i);
        // a row is rebuilt only when something it shows changed
        const key = row ? JSON.stringify([row, row.node.id === selected, layout.timeline, lo, hi, span[1], over()]) : "pending";
        if (div.dataset.key === key) continue;
        div.dataset.key = key;
        if (row) fillRow(div, row, lo, hi);
        else {
          // not fetched yet (a scroll far away): a placeholder until the window arrives
          delete div.dataset.id;
          div.className = "lfx-te-row";
          div.replaceChildren(h("span", { class: "lfx-te-label lfx-muted", text: "…" }));
        }
      }
      for (let s = end - start; s < pool.length; s++) pool[s].style.display = "none";
    }

    const chip = (status: string) => h("span", { class: `lfx-st lfx-st-${status.replace(/\s+/g, "_")}`, text: status });
    const belowTag = (text: string) => text && h("span", { class: "lfx-te-below", text: `(${text})` });
    function fillRow(div: HTMLElement, row: WindowRow, lo: number, hi: number): void {
      const node = row.node;
      const id = String(node.id);
      const r = rollupOf(row);
      const open = row.kids && row.open;
      const v = rowValuesOf(row, over());
      div.dataset.id = id;
      div.className = `lfx-te-row${selected === id ? " lfx-sel" : ""}${row.match ? " lfx-match" : ""}`;
      div.setAttribute("aria-expanded", String(open));
      div.setAttribute("aria-selected", String(selected === id));
      div.style.paddingLeft = `${row.depth * 14 + 2}px`;
      // a collapsed row says how many nodes it holds: nothing is hidden without a count
      const more = row.kids && !open && r.descendants ? `${r.descendants.toLocaleString("en-US")} ${plural(r.descendants, "node")}` : "";
      // a running node's timeline bar reaches the axis end
      const running = isLive(node.status) && !over();
      const end = typeof node.end === "number" ? node.end : running ? Math.max(hi, span[1]) : node.start;
      const place = layout.timeline && typeof node.start === "number" ? barPlace(node.start, end as number, lo, hi) : null;
      const bar = place && h("span", {
        class: `lfx-te-bar-tl k-${v.kind || "node"} s-${v.status.replace(/\s+/g, "_")}${humanWait(node) ? " w-human" : ""}`,
        style: `left:${place[0].toFixed(3)}%;width:${place[1].toFixed(3)}%`,
      });
      div.replaceChildren(
        h("span", { class: "lfx-te-caret", "data-caret": "1", text: row.kids ? (open ? "▾" : "▸") : "" }),
        h("span", { class: "lfx-te-kind", text: v.kind || "node" }),
        h("span", { class: "lfx-te-label" },
          h("span", { class: "lfx-te-name", text: v.name || id }),
          belowTag(v.below),
          more && h("span", { class: "lfx-te-more", text: more }),
          v.hint && h("span", { class: "lfx-te-hint", text: v.hint }),
        ),
        ...cols(
          ["st", "", chip(v.status)],
          ["dur lfx-dur", v.duration || (running ? "…" : "—")],
          ["tok", v.tokens],
          ["cost", v.cost.split(" (")[0]], // "≥ $1.23" of a partial sum: the details give the whole label
        ),
        h("span", { class: "lfx-te-c lfx-te-c-tl" }, bar),
      );
    }

    /** The bar's counts, badge, Cancel button and the note when the kernel is gone. */
    function drawBar(): void {
      const reply = win.reply;
      const nodes = reply.nodes;
      empty.style.display = reply.total ? "none" : "";
      empty.textContent = query.trim()
        ? `No nodes match “${query.trim()}”. Clear the filter to see all ${nodes} ${plural(nodes, "node")}.`
        : "No trace nodes yet.";
      const c = reply.counts.status;
      const waiting = over() ? 0 : c.waiting ?? 0;
      // the session root runs until disposed: only work under it counts as running
      const running = !over() ? (c.running ?? 0) + waiting - (reply.roots_running ?? 0) : 0;
      const failed = BAD.reduce((k, s) => k + (c[s] ?? 0), 0);
      badge.textContent = waiting ? `${waiting} approval${waiting > 1 ? "s" : ""} waiting` : "";
      badge.style.display = waiting ? "" : "none";
      cancelButton.style.display = running > 0 ? "" : "none";
      closedBar.style.display = closed ? "" : "none";
      closedBar.textContent = closed;
      const unpriced = typeof totals?.unpriced_requests === "number" ? totals.unpriced_requests : 0;
      const cost = totals && (typeof totals.cost === "number" || unpriced) ? ` · ${totalCostText(totals.cost, unpriced, Array.isArray(totals.unpriced_models) ? totals.unpriced_models.map(String) : [])}` : "";
      const matches = reply.matches;
      summary.textContent = `${nodes} ${plural(nodes, "node")} · ${running} running · ${failed} failed/denied/cancelled${cost}` +
        (query && typeof matches === "number" ? ` · ${matches} match${matches === 1 ? "" : "es"}` : "") +
        (query ? ` · ${reply.total} shown` : "");
    }

    /** A part of the details under its title, with a button that copies the whole value. */
    function section(label: string, value: unknown, body = label === "Error" ? errorBox(value) : readable(value)): void {
      const copy = () => (label === "Error" ? errorCopyText(value) : asText(value));
      detail.append(h("h4", {}, h("span", { text: label }), copyButton(copy)), body);
    }

    let selectedRow: WindowRow | undefined; // the selection's row, kept while it is scrolled away
    let detailFor = "";
    function drawDetail(): void {
      selectedRow = win.at(win.indexOf(selected)) ?? (selectedRow?.node.id === selected ? selectedRow : undefined);
      const node = (selected && details.get(selected)) || selectedRow?.node;
      const hidden = !!node && !!query.trim() && win.selected === selected && win.reply.selected_index === -1; // filtered out
      const key = JSON.stringify(node ? [selected, detailsVersion, selectedRow, hidden, over()] : null);
      if (key === detailFor) return;
      detailFor = key;
      if (!node || hidden) {
        const text = hidden ? "The selected node is hidden by the filter." : "Select a node to see its details (click, or ↑/↓ then Enter).";
        return void detail.replaceChildren(h("div", { class: "lfx-muted", text }));
      }
      const row = { ...selectedRow, node };
      const r = rollupOf(row);
      const v = rowValuesOf(row, over());
      const tokens = r.tokens ? `tokens ${r.tokens.toLocaleString("en-US")} in this subtree (${r.own.toLocaleString("en-US")} in this node)` : "tokens —";
      detail.replaceChildren(
        h("div", {}, h("b", { text: v.name || node.id }), " ", chip(v.status), belowTag(v.below)),
        h("div", { class: "lfx-muted lfx-te-meta", text: `${v.kind || "node"} · duration ${v.duration || "—"} · ${tokens} · cost ${v.cost || "—"}${r.priced ? " in this subtree" : " (no price known)"}` }),
      );
      if (!details.get(node.id)) {
        // rows carry summaries; the full record (prompt, response, args…) on demand
        if (!details.has(node.id)) {
          details.set(node.id, null);
          trySend(model, { kind: KINDS.DETAIL_REQUEST, id: node.id });
        }
        detail.append(h("div", { class: "lfx-muted", text: "loading details…" }));
      }
      const has = (k: string) => node[k] != null && node[k] !== "";
      if (has("error")) section("Error", node.error);
      const chat = conversation(node);
      if (chat) {
        section("Conversation", chat, chatView(chat) ?? readable(chat));
        const out = node.outputs as Record<string, unknown> | undefined;
        if (out && typeof out === "object" && out.result !== undefined) section("Result", out.result);
      }
      // a tool call's wall time split into the tool's own time and a person's decision
      const dur = durationMs(node);
      const wait = node.kind === "tool_call" ? humanWait(node) : null;
      const ms = (t: number) => fmtDuration(t) || "0 ms";
      if (dur !== null && wait) section("Time", { total: ms(dur), tool: ms(Math.max(0, dur - wait * 1000)), "waiting for a person": ms(wait * 1000) });
      const decision = node.decision as Record<string, any> | undefined;
      const inputs = node.inputs as Record<string, any> | undefined;
      if (has("inputs") && decision?.args && typeof inputs === "object") {
        // an edited call: what ran, what the model proposed, and the difference
        section("Arguments that ran (edited)", decision.args);
        section("Model's proposal", inputs.args ?? {});
        section("Changed", argChanges(inputs.args, decision.args));
        const rest = Object.fromEntries(Object.entries(inputs).filter(([key]) => key !== "args"));
        if (Object.keys(rest).length) section("Inputs", rest);
      } else if (has("inputs")) section("Inputs", inputs);
      if (has("outputs")) section("Output", node.outputs);
      if (has("decision") && decision) {
        // its times as local times; edited arguments have their own sections
        const shown = Object.entries(decision).filter(([key, value]) => key !== "args" && value != null)
          .map(([key, value]) => [key, key === "asked_at" || key === "decided_at" ? localTime(value, offset) : value]);
        section("Policy decision", Object.fromEntries(shown.filter(([, text]) => text !== "")));
      }
      if (has("usage")) section("Usage", node.usage);
      for (const [k, v] of Object.entries(node)) if (!SHOWN_KEYS.has(k) && v != null && v !== "") section(k, v);
    }

    // -- the reader's actions ---------------------------------------------------------------
    function reveal(i: number): void {
      const top = i * ROW_H;
      if (top < scroll.scrollTop) scroll.scrollTop = top;
      else if (top + ROW_H > scroll.scrollTop + scroll.clientHeight) scroll.scrollTop = top + ROW_H - scroll.clientHeight;
    }
    function select(id: string | null, show = false): void {
      selected = id;
      const i = win.indexOf(id);
      if (show && i >= 0) reveal(i);
      else if (show && id) revealWanted = true; // the kernel says where it is
      changed();
    }
    function toggleMax(on = !layout.max): void {
      layout.max = on;
      changed();
      cancelAnimationFrame(frame);
      draw(); // now, so the pane that gets the focus is visible
      (on ? detail : scroll).focus();
    }

    /** The kernel is gone: nothing shown can still be running. */
    function closeAll(): void {
      closed = "kernel restarted or shut down — live updates stopped; what is shown is the last state received";
      schedule();
    }
    const stopWatching = onKernelGone(el, model, closeAll);
    scroll.addEventListener("scroll", () => {
      ensureWindow(...onScreen());
      schedule();
    });
    scroll.addEventListener("click", (ev) => {
      const target = ev.target as HTMLElement;
      const id = (target.closest(".lfx-te-row") as HTMLElement | null)?.dataset.id;
      if (!id) return;
      const row = win.at(win.indexOf(id));
      if (target.dataset.caret && row?.kids) toggle(id, !row.open);
      else select(id);
    });
    scroll.addEventListener("keydown", (ev) => {
      const n = win.reply.total;
      if (!n) return;
      const idx = win.indexOf(selected);
      const row = win.at(idx);
      const page = Math.max(1, Math.floor((scroll.clientHeight || MAIN_H) / ROW_H) - 1);
      const go = (i: number) => {
        const at = Math.max(0, Math.min(n - 1, i));
        const target = win.at(at)?.node.id;
        if (target !== undefined) return select(target, true);
        goWanted = at; // select it once its window arrives
        reveal(at);
        schedule();
      };
      switch (ev.key) {
        case "ArrowDown": go(idx + 1); break;
        case "ArrowUp": go(idx < 0 ? 0 : idx - 1); break;
        case "Home": go(0); break;
        case "End": go(n - 1); break;
        case "PageDown": go(idx + page); break;
        case "PageUp": go(idx - page); break;
        // → opens, then moves to the first child; ← closes, then moves to the parent
        case "ArrowRight": if (row?.kids && !row.open) toggle(row.node.id, true); else go(idx + 1); break;
        case "ArrowLeft": {
          const parent = (row?.node ?? details.get(selected as string))?.parent_id;
          if (idx < 0) go(0);
          else if (row?.kids && row.open) toggle(row.node.id, false);
          else if (parent != null) select(parent, true);
          break;
        }
        case "Enter": if (idx >= 0) toggleMax(true); break;
        default: return;
      }
      ev.preventDefault();
    });
    root.addEventListener("keydown", (ev) => {
      const t = ev.target as HTMLElement;
      if (ev.key === "/" && t.tagName !== "INPUT" && t.tagName !== "TEXTAREA") {
        ev.preventDefault();
        ev.stopPropagation();
        search.focus();
        search.select();
      } else if (ev.key === "Escape" && layout.max) {
        ev.stopPropagation();
        toggleMax(false);
      } else if (ev.key === "Escape" && t === search) scroll.focus();
    });
    // the wheel over the overview strip or the axis zooms around the pointer
    const onWheel = (ev: WheelEvent) => {
      const box = (ev.currentTarget as HTMLElement).getBoundingClientRect();
      if (!ev.deltaY || !box.width) return;
      ev.preventDefault();
      setZoom(zoomBy(fullSpan(), layout.zoom, ev.deltaY < 0 ? 0.8 : 1.25, (ev.clientX - box.left) / box.width));
    };
    ovCell.addEventListener("wheel", onWheel, { passive: false });
    axis.addEventListener("wheel", onWheel, { passive: false });
    search.addEventListener("input", () => {
      clearTimeout(searchTimer);
      searchTimer = setTimeout(() => {
        query = search.value;
        changed();
      }, 120);
    });
    const onTitle = () => (title.textContent = model.get("title") || "Trace");
    model.on("change:title", onTitle);
    schedule();
    trySend(model, { kind: KINDS.SYNC, seq: Math.max(seq, 0) });
    return () => {
      stopWatching();
      model.off("change:state", onState);
      model.off("msg:custom", onMessage);
      model.off("change:title", onTitle);
      clearTimeout(retry);
      if (frame) cancelAnimationFrame(frame);
    };
  },
};
