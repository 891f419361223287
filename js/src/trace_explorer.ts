// TraceExplorer view: a virtualized tree (only rows on screen are in the DOM) with a timeline
// (waterfall) column on a shared time axis, search that keeps ancestors of matches, a
// resizable / maximizable detail pane built for reading, keyboard navigation, and view state
// (selection, expansion, filter, layout) kept in the model so a reload restores it. The page
// never holds the tree: it asks the kernel for the window of rows on screen (a live trace's
// windows are pushed again as it changes) and for a selected node's full record.
import { KINDS } from "./kinds";
import { asText, chatView, clear, copyButton, decodeState, errorBox, errorCopyText, errorText, fmtCost, fmtDuration, h, injectCss, localTime, markLive, messageTurns, onKernelGone, plural, readable, requestAt, totalCostText, trySend } from "./dom";
import { BAR_LIMIT, BUCKETS, GROUPS, Zoom, barPlace, panBy, visibleRange, zoomBy } from "./timeline";
import { BAD, Rollup, RowWindow, TraceNode, WindowReply, argChanges, belowText, costShort, costText, durationMs, humanWait, isLive, rollupOf, rowValuesOf, statusLabel, windowRange } from "./tree";

export { costText } from "./tree";

const ROW_H = 22;
const MAIN_H = 440;
const NARROW_PX = 760;
/** Rows asked for beyond what is on screen (scrolling stays local). */
const MARGIN = 60;
/** How long a window request may go unanswered before the page asks again. */
const WINDOW_WAIT_MS = 3000;
/** Window requests of every view on the page, numbered in order (a reply names its own). */
let windowRequests = 0;

interface Model {
  get(name: string): any;
  set(name: string, value: unknown): void;
  save_changes(): void;
  on(event: string, cb: (...args: any[]) => void): void;
  off(event?: string, cb?: (...args: any[]) => void): void;
  send(content: unknown): void;
}

interface Layout {
  timeline: boolean;
  split: number; // tree pane share of the width, 0.2–0.8
  height: number; // px of the tree + detail area
  max: boolean; // detail maximized
  zoom: Zoom; // the timeline's visible time range (null: the whole trace)
}

interface Shared {
  /** Full records of the nodes the detail pane asked the kernel for, by id. */
  details: Map<string, TraceNode>;
  /** Bumped when a record arrives (the detail pane redraws). */
  detailsVersion: number;
  expanded: Map<string, boolean>;
  selected: string | null;
  query: string;
  seq: number;
  layout: number;
  view: Layout;
  requested: Set<string>;
  summary: Record<string, any> | null;
  /** The trace's time axis [earliest start, latest end or start], as the kernel sends it. */
  span: [number, number];
  /** Wall-clock seconds minus trace seconds (decision times shown as local times). */
  offset: number | null;
  /** The trace is over (a saved trace, a disposed session): nothing in it runs any more. */
  ended: boolean;
  /** Set once the kernel is gone: why live updates stopped. */
  closed: string;
  /** The window of rows the page holds. */
  win: RowWindow;
  listeners: Set<() => void>;
}

const stClass = (status: string) => `lfx-st lfx-st-${status.replace(/\s+/g, "_")}`;

/** Benchmarks set `globalThis.__lfxTraceHook` to hear of each draw (when, how many nodes). */
type Hook = (info: { renderedAt: number; nodes: number }) => void;

const CSS = `
.lfx-te{border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:4px;background:var(--jp-layout-color0,#fff)}
.lfx-te-bar{display:flex;flex-wrap:wrap;gap:6px 8px;align-items:center;padding:4px 6px;border-bottom:1px solid var(--jp-border-color2,#e0e0e0)}
.lfx-te-bar input{flex:1 1 220px;min-width:160px;font:inherit;padding:2px 6px;border:1px solid var(--jp-border-color1,#bdbdbd);border-radius:3px;background:var(--jp-layout-color1,#fff);color:var(--jp-ui-font-color1,#222)}
.lfx-te-bar .lfx-te-tools{display:flex;gap:4px;margin-left:auto}
.lfx-te-bar button[aria-pressed=true]{background:var(--jp-layout-color3,#bdbdbd);color:var(--jp-ui-font-color0,#000)}
.lfx-te-main{display:flex;height:${MAIN_H}px;min-height:160px;overflow:hidden;resize:vertical}
.lfx-te-left{display:flex;flex-direction:column;min-width:0;flex:0 0 62%;container-type:inline-size}
.lfx-te-head,.lfx-te-row{display:flex;align-items:center;gap:6px;white-space:nowrap;box-sizing:border-box;padding-right:6px}
.lfx-te-head{height:20px;font-size:11px;color:var(--jp-ui-font-color2,#757575);border-bottom:1px solid var(--jp-border-color2,#e0e0e0);padding-left:22px;scrollbar-gutter:stable;overflow:hidden}
.lfx-te-scroll{flex:1;overflow:auto;position:relative;outline:none;scrollbar-gutter:stable}
.lfx-te-scroll:focus-visible{box-shadow:inset 0 0 0 2px var(--jp-brand-color1,#2196f3)}
.lfx-te-row{position:absolute;left:0;right:0;height:${ROW_H}px;cursor:pointer}
.lfx-te-row:hover{background:var(--jp-layout-color2,#eee)}
.lfx-te-row.lfx-sel{background:var(--jp-layout-color3,#bdbdbd);color:var(--jp-ui-font-color0,#000);box-shadow:inset 3px 0 0 var(--jp-brand-color1,#2196f3)}
.lfx-te-row.lfx-sel *{color:var(--jp-ui-font-color0,#000)}
.lfx-te-row.lfx-match .lfx-te-name{text-decoration:underline dotted}
.lfx-te-caret{width:14px;text-align:center;flex:none;color:var(--jp-ui-font-color1,#222)}
.lfx-te-kind{font-size:10px;color:var(--jp-ui-font-color1,#222);border:1px solid var(--jp-border-color1,#bdbdbd);border-radius:3px;padding:0 3px;flex:none}
.lfx-te-label{overflow:hidden;text-overflow:ellipsis;flex:1 1 auto;min-width:40px}
.lfx-te-hint{color:var(--jp-ui-font-color2,#757575);margin-left:6px}
.lfx-te-c{flex:none;text-align:right;font-size:11px;font-variant-numeric:tabular-nums;color:var(--jp-ui-font-color1,#222)}
.lfx-te-c-st{width:64px;text-align:center}
.lfx-te-c-st .lfx-st{min-width:56px}
.lfx-te-c-dur{width:52px}
.lfx-te-c-tok{width:58px}
.lfx-te-c-cost{width:50px}
.lfx-te-c-tl{width:22cqi;min-width:70px;position:relative;height:12px;text-align:left;overflow:hidden}
.lfx-te-head .lfx-te-c-tl{height:auto}
@container (max-width: 620px){.lfx-te-c-tok,.lfx-te-c-cost{display:none}}
@container (max-width: 420px){.lfx-te-c-tl{display:none}}
.lfx-te-nol .lfx-te-c-tl{display:none}
.lfx-te-bar-tl{position:absolute;top:1px;height:10px;min-width:2px;border-radius:2px;background:var(--lfx-c,var(--jp-ui-font-color2,#757575));opacity:.9}
.lfx-te-bar-tl.k-query{--lfx-c:var(--lfx-run)}
.lfx-te-bar-tl.k-tool_call{--lfx-c:var(--lfx-warn)}
.lfx-te-bar-tl.k-action,.lfx-te-bar-tl.k-session{--lfx-c:color-mix(in srgb,var(--jp-ui-font-color1,#222) 45%,transparent)}
.lfx-te-bar-tl.k-log{--lfx-c:var(--jp-ui-font-color2,#757575);width:2px!important;min-width:2px}
.lfx-te-bar-tl.s-failed,.lfx-te-bar-tl.s-timed_out{--lfx-c:var(--lfx-bad)}
.lfx-te-bar-tl.s-denied,.lfx-te-bar-tl.s-cancelled{background:repeating-linear-gradient(45deg,var(--lfx-warn) 0 3px,transparent 3px 6px);outline:1px solid var(--lfx-warn)}
.lfx-te-bar-tl.s-running{opacity:.55}
.lfx-te-bar-tl.s-suspended{--lfx-c:var(--lfx-paused)}
.lfx-te-bar-tl.w-human{background:repeating-linear-gradient(90deg,var(--lfx-warn) 0 2px,transparent 2px 4px)}
.lfx-te-axis{display:flex;justify-content:space-between}
.lfx-te-ov{height:26px;cursor:default}
.lfx-te-ov .lfx-te-c-tl{height:22px;display:flex;align-items:flex-end;gap:0;cursor:zoom-in;border-bottom:1px solid var(--jp-border-color2,#e0e0e0)}
.lfx-te-ov-b{flex:1 1 0;display:flex;flex-direction:column-reverse;min-width:0;height:100%}
.lfx-te-ov-b span{display:block;flex:none}
.lfx-te-ov-b .g-ok{background:color-mix(in srgb,var(--jp-ui-font-color1,#222) 45%,transparent)}
.lfx-te-ov-b .g-running{background:var(--lfx-run,#1a73e8)}
.lfx-te-ov-b .g-failed{background:var(--lfx-bad,#b3261e)}
.lfx-te-nol .lfx-te-ov,.lfx-te-nol .lfx-te-zoom{display:none}
.lfx-te-split{flex:0 0 6px;cursor:col-resize;background:var(--jp-border-color2,#e0e0e0)}
.lfx-te-split:hover{background:var(--jp-brand-color2,#64b5f6)}
.lfx-te-detail{flex:1;min-width:0;padding:6px 10px;overflow:auto;box-sizing:border-box}
.lfx-te-detail h4{display:flex;align-items:center;gap:6px;margin:10px 0 3px 0;font-size:12px}
.lfx-te-detail h4 .lfx-copy{margin-left:auto}
.lfx-te-empty{padding:12px;color:var(--jp-ui-font-color2,#757575)}
.lfx-te.lfx-max .lfx-te-left,.lfx-te.lfx-max .lfx-te-split{display:none}
.lfx-te.lfx-narrow .lfx-te-main{flex-direction:column}
.lfx-te.lfx-narrow .lfx-te-left{flex:0 0 50%!important}
.lfx-te.lfx-narrow .lfx-te-split{display:none}
.lfx-te.lfx-narrow .lfx-te-detail{border-top:1px solid var(--jp-border-color2,#e0e0e0)}
.lfx .lfx-st-waiting_for_approval{background:var(--lfx-warn,#f9ab00);color:#000}
.lfx .lfx-st-unfinished,.lfx .lfx-st-open{background:var(--jp-layout-color2,#eee);color:var(--jp-ui-font-color2,#555)}
.lfx-te-below{color:var(--lfx-bad,#b3261e);font-size:11px;margin-left:6px;white-space:nowrap}
.lfx-te-badge{background:var(--lfx-warn,#f9ab00);color:#000;border-radius:8px;padding:0 6px;font-size:11px;white-space:nowrap}
.lfx-te-more{color:var(--jp-ui-font-color2,#757575);font-size:11px;margin-left:6px}
.lfx-te-row.lfx-te-pending{color:var(--jp-ui-font-color3,#aaa)}
.lfx-te-closed{background:rgba(249,171,0,.15);color:var(--jp-ui-font-color1,#8a5a00);padding:2px 6px}
`;

// The node's own fields (TraceNode.to_json), in reading order; any other field follows.
const DETAIL_ORDER: [string, string][] = [
  ["error", "Error"],
  ["inputs", "Inputs"],
  ["outputs", "Output"],
  ["decision", "Policy decision"],
  ["usage", "Usage"],
];
const SUMMARY_KEYS = new Set(["id", "parent_id", "kind", "name", "status", "start", "end", "cost", "partial", "hint"]);

/** Benchmarks set `globalThis.__lfxTimings = []` to get a breakdown of where time goes. */
function timing(label: string, since: number): void {
  const t = (globalThis as any).__lfxTimings;
  if (Array.isArray(t)) t.push([label, Math.round((performance.now() - since) * 10) / 10]);
}

/** An absolute timestamp (ms since the epoch) for the benchmark's timeline. */
function mark(label: string): void {
  const t = (globalThis as any).__lfxTimings;
  if (Array.isArray(t)) t.push([`@${label}`, Date.now()]);
}

function defaultLayout(): Layout {
  return { timeline: true, split: 0.62, height: MAIN_H, max: false, zoom: null };
}

function createShared(): Shared {
  return { details: new Map(), detailsVersion: 0, expanded: new Map(), selected: null, query: "", seq: 0, layout: 0, view: defaultLayout(), requested: new Set(), summary: null, span: [Infinity, -Infinity], offset: null, ended: false, closed: "", win: new RowWindow(), listeners: new Set() };
}

/** A query node as a conversation: its system message, the prompt as sent, the answer (with
 *  any tool calls). Null for other nodes or when the record has no prompt. */
export function conversation(node: TraceNode): unknown[] | null {
  if (node.kind !== "query") return null;
  const inp = node.inputs as Record<string, any> | undefined;
  const out = node.outputs as Record<string, any> | undefined;
  if (!inp || typeof inp !== "object") return null;
  const turns: unknown[] = [];
  const system = inp.options?.system_message ?? inp.system_message;
  if (typeof system === "string" && system) turns.push({ role: "system", text: system });
  const sent = messageTurns(inp.rendered_prompt ?? inp.messages ?? inp.prompt);
  if (sent) {
    // a protocol's prompt holds its instructions and example first: open on the user's request
    const template = typeof inp.prompt === "string" ? inp.prompt : "";
    turns.push(...sent.turns.map((t) => (t.role === "user" && typeof t.text === "string" && template ? { ...t, open_at: requestAt(t.text, template) } : t)));
  }
  else if (typeof inp.prompt === "string") turns.push({ role: "user", text: inp.prompt });
  if (out && typeof out === "object") {
    // the model's reasoning, when the trace kept it, as its own block before the answer
    const parts: unknown[] = Array.isArray(out.reasoning) ? out.reasoning : out.reasoning ? [out.reasoning] : [];
    for (const r of parts) {
      const text = typeof r === "string" ? r : (r as any)?.redacted ? "(redacted by the provider)" : String((r as any)?.text ?? "");
      if (text) turns.push({ role: "reasoning", text });
    }
    const answer = messageTurns(out.response ?? out.message);
    if (answer) turns.push(...answer.turns);
    else if (typeof out.text === "string" || Array.isArray(out.tool_calls)) {
      turns.push({ role: "assistant", text: out.text ?? "", tool_calls: out.tool_calls });
    }
  }
  return turns.length ? turns : null;
}

export default () => {
  const shared = createShared();
  const windowListeners = new Set<(reply: WindowReply) => void>();

  /** The state trait / snapshot buffer: UTF-8 JSON bytes (a DataView in anywidget). */
  function decode(raw: any): any {
    if (!raw) return null;
    const t0 = performance.now();
    try {
      return decodeState(raw);
    } finally {
      timing("decode", t0);
    }
  }

  function applyState(state: any): void {
    if (!state || !state.windowed || typeof state.windowed !== "object") return;
    shared.win = new RowWindow();
    shared.win.set(state.windowed as WindowReply, "0|");
    shared.span = Array.isArray(state.span) ? [state.span[0], state.span[1]] : [Infinity, -Infinity];
    shared.summary = state.summary ?? null;
    shared.offset = typeof state.offset === "number" ? state.offset : shared.offset;
    shared.seq = typeof state.seq === "number" ? state.seq : shared.seq;
    shared.ended = state.ended === true;
  }

  function restoreView(saved: any): void {
    if (!saved || typeof saved !== "object") return;
    if (typeof saved.selected === "string") shared.selected = saved.selected;
    if (typeof saved.query === "string") shared.query = saved.query;
    if (Array.isArray(saved.expanded)) {
      for (const e of saved.expanded) if (Array.isArray(e) && typeof e[0] === "string") shared.expanded.set(e[0], !!e[1]);
      shared.layout++;
    }
    const v = saved.view;
    if (v && typeof v === "object") {
      shared.view = {
        timeline: v.timeline !== false,
        split: typeof v.split === "number" ? Math.min(0.8, Math.max(0.2, v.split)) : 0.62,
        height: typeof v.height === "number" ? Math.max(160, v.height) : MAIN_H,
        max: !!v.max,
        zoom: Array.isArray(v.zoom) && v.zoom.length === 2 && v.zoom.every((t: unknown) => typeof t === "number" && Number.isFinite(t)) && v.zoom[0] <= v.zoom[1] ? [v.zoom[0], v.zoom[1]] : null,
      };
    }
  }

  let saveTimer: ReturnType<typeof setTimeout> | undefined;
  function saveView(model: Model): void {
    clearTimeout(saveTimer);
    saveTimer = setTimeout(() => {
      model.set("view_state", {
        selected: shared.selected,
        query: shared.query,
        expanded: [...shared.expanded.entries()],
        view: { ...shared.view },
      });
      model.save_changes();
    }, 300);
  }

  return {
    initialize({ model }: { model: Model }) {
      mark("initialize");
      applyState(decode(model.get("state")));
      restoreView(model.get("view_state"));
      // The synced state trait: newer than what this page has seen (page reload, a state set
      // after the widget opened, a saved trace) → adopt it. Equal seq: already applied live.
      model.on("change:state", () => {
        // Once a snapshot or another trace arrived by message it is the truth; a later trait
        // copy has the same seq, and decoding it again would only stall the page.
        if (shared.seq > 0) return;
        const state = decode(model.get("state"));
        if (!state || typeof state.seq !== "number") return;
        if (state.seq > shared.seq || (state.seq === 0 && shared.seq === 0)) {
          applyState(state);
          for (const l of shared.listeners) l();
        }
      });
      model.on("msg:custom", (msg: any, buffers?: any[]) => {
        if (msg?.kind === KINDS.WINDOW) {
          for (const l of windowListeners) l(msg as WindowReply);
        } else if (msg?.kind === KINDS.DETAIL && msg.node) {
          shared.details.set(String(msg.id), { ...msg.node, id: String(msg.id) });
          shared.detailsVersion++;
          for (const l of shared.listeners) l();
        } else if (msg?.kind === KINDS.SNAPSHOT) {
          applyState({ ...decode(buffers?.[0]), seq: msg.seq });
          for (const l of shared.listeners) l();
        } else if (msg?.kind === KINDS.SHOW) {
          // another trace in place (TraceExplorer.show): the reader's choices start afresh
          mark("show");
          const state = decode(buffers?.[0]);
          if (!state) return;
          shared.requested.clear();
          shared.details.clear();
          shared.expanded.clear();
          shared.selected = null;
          shared.query = "";
          applyState({ ...state, seq: msg.seq });
          restoreView(msg.view_state);
          shared.layout++;
          for (const l of shared.listeners) l();
        }
      });
    },

    render({ model, el }: { model: Model; el: HTMLElement }) {
      // JupyterLab's own shortcuts (↑/↓ move between cells…) stay out of the explorer's keys
      const root = h("div", { class: "lfx lfx-te", "data-lm-suppress-shortcuts": "true" });
      injectCss(root, CSS);
      const title = h("b", { text: model.get("title") || "Trace" });
      const search = h("input", { type: "search", class: "lfx-te-filter", placeholder: "filter: name, kind, status, message, error…  ( / )" }) as HTMLInputElement;
      search.value = shared.query;
      const summary = h("span", { class: "lfx-muted lfx-te-summary" });
      const badge = h("span", { class: "lfx-te-badge", style: "display:none" });
      const cancelButton = h("button", { class: "lfx-btn lfx-te-cancel", type: "button", text: "Cancel run", style: "display:none", title: "Cancel the run this trace follows; a tool waiting for approval does not run" }) as HTMLButtonElement;
      const closedBar = h("div", { class: "lfx-te-closed", style: "display:none" });
      const timelineBtn = h("button", { class: "lfx-btn lfx-te-tl-toggle", type: "button", title: "Show or hide the timeline column", text: "Timeline" });
      const zoomOut = h("button", { class: "lfx-btn lfx-te-zoom lfx-te-zout", type: "button", title: "Zoom the timeline out ( - )", text: "−" }) as HTMLButtonElement;
      const zoomIn = h("button", { class: "lfx-btn lfx-te-zoom lfx-te-zin", type: "button", title: "Zoom the timeline in ( + ; or the wheel over the overview strip)", text: "+" }) as HTMLButtonElement;
      const zoomReset = h("button", { class: "lfx-btn lfx-te-zoom lfx-te-zreset", type: "button", title: "Show the whole trace on the timeline ( 0 )", text: "⟲" }) as HTMLButtonElement;
      const maxBtn = h("button", { class: "lfx-btn lfx-te-max", type: "button", title: "Maximize the details (Enter / Esc)", text: "⤢ Details" });
      const head = h("div", { class: "lfx-te-head" },
        h("span", { class: "lfx-te-label", text: "name" }),
        h("span", { class: "lfx-te-c lfx-te-c-st", text: "status" }),
        h("span", { class: "lfx-te-c lfx-te-c-dur", text: "duration" }),
        h("span", { class: "lfx-te-c lfx-te-c-tok", text: "tokens Σ", title: "this node and all below it" }),
        h("span", { class: "lfx-te-c lfx-te-c-cost", text: "cost Σ", title: "this node and all below it; — when no price is known" }));
      const axis = h("span", { class: "lfx-te-c lfx-te-c-tl lfx-te-axis" });
      head.append(axis);
      const ovLabel = h("span", { class: "lfx-te-label lfx-muted" });
      const ovCell = h("span", { class: "lfx-te-c lfx-te-c-tl" });
      const ov = h("div", { class: "lfx-te-head lfx-te-ov" }, ovLabel,
        h("span", { class: "lfx-te-c lfx-te-c-st" }), h("span", { class: "lfx-te-c lfx-te-c-dur" }),
        h("span", { class: "lfx-te-c lfx-te-c-tok" }), h("span", { class: "lfx-te-c lfx-te-c-cost" }), ovCell);
      const scroll = h("div", { class: "lfx-te-scroll", role: "tree", tabindex: 0, "aria-label": "trace tree" });
      const spacer = h("div", { style: "position:relative;width:100%" });
      const empty = h("div", { class: "lfx-te-empty", style: "display:none" });
      scroll.append(spacer, empty);
      const left = h("div", { class: "lfx-te-left" }, head, ov, scroll);
      const split = h("div", { class: "lfx-te-split", role: "separator", "aria-orientation": "vertical", title: "drag to resize" });
      const detail = h("div", { class: "lfx-te-detail", tabindex: -1 });
      const main = h("div", { class: "lfx-te-main" }, left, split, detail);
      root.append(h("div", { class: "lfx-te-bar" }, title, search, badge, summary, h("span", { class: "lfx-te-tools" }, cancelButton, zoomOut, zoomIn, zoomReset, timelineBtn, maxBtn)), closedBar, main);
      el.append(root);
      markLive(el);
      let frame = 0;
      let detailFor = "";
      let selInfo: { id: string; r: Rollup | undefined; below: Record<string, number> | undefined } | null = null;
      let layoutKey = "";
      const pool: HTMLElement[] = [];

      const notify = () => {
        for (const l of shared.listeners) l();
        askNow();
        saveView(model);
      };

      const schedule = () => {
        if (!frame) frame = requestAnimationFrame(draw);
      };
      /** Draw now rather than at the next frame (what is drawn shows in the coming frame). */
      const drawNow = () => {
        if (frame) cancelAnimationFrame(frame);
        draw();
      };
      /** Ask for the rows the view now needs at once, from the user's action, rather than
       *  from the next frame's draw (one frame less between the action and the request; the
       *  draw then finds the request in flight). */
      function askNow(): void {
        const [start, end] = windowRange(scroll.scrollTop, scroll.clientHeight || shared.view.height, ROW_H, view.count());
        ensureWindow(start, end);
      }

      function applyLayout(): void {
        const v = shared.view;
        const key = `${v.timeline}|${v.split}|${v.height}|${v.max}`;
        if (key === layoutKey) return;
        layoutKey = key;
        root.classList.toggle("lfx-te-nol", !v.timeline);
        root.classList.toggle("lfx-max", v.max);
        timelineBtn.setAttribute("aria-pressed", String(v.timeline));
        maxBtn.setAttribute("aria-pressed", String(v.max));
        maxBtn.textContent = v.max ? "⤡ Tree" : "⤢ Details";
        left.style.flexBasis = `${Math.round(v.split * 100)}%`;
        main.style.height = `${v.max ? Math.max(v.height, 560) : v.height}px`;
      }

      /** The whole trace's time axis (at least 1 ms long). */
      function fullSpan(): [number, number] {
        const [lo, hi] = shared.span;
        return Number.isFinite(lo) ? [lo, Math.max(hi, lo + 1e-3)] : [0, 1];
      }

      /** The timeline's axis: the zoomed range of the trace's axis. */
      function timeSpan(): [number, number] {
        return visibleRange(fullSpan(), shared.view.zoom);
      }

      function setZoom(zoom: Zoom): void {
        shared.view.zoom = zoom;
        notify();
      }

      /** The timeline overview's key: what a window request asked for ("" none). */
      const tlKey = (): string => (!shared.view.timeline ? "" : shared.view.zoom ? timeSpan().join("|") : "whole");

      const ovBars: HTMLElement[][] = [];
      /** The strip above the rows: counts per time bucket when the range holds more nodes
       *  than bars can show, else the number of nodes in range (the rows show their bars). */
      function drawOverview(lo: number, hi: number): void {
        if (!shared.view.timeline) return;
        const o = shared.win.reply.timeline ?? null;
        const many = !!o && o.in_range > BAR_LIMIT;
        const apart = o ? [o.before && `${o.before.toLocaleString("en-US")} before`, o.after && `${o.after.toLocaleString("en-US")} after`, o.untimed && `${o.untimed.toLocaleString("en-US")} with no time`].filter(Boolean).join(" · ") : "";
        ovLabel.textContent = !o ? "timeline: counting…" : `${o.in_range.toLocaleString("en-US")} nodes start in this range${many ? " (counts by start time)" : " (bars below)"}${apart ? ` · ${apart}` : ""}`;
        ovLabel.title = ovLabel.textContent;
        ovCell.style.visibility = many ? "" : "hidden";
        if (!o || !many) return;
        const n = o.buckets;
        let top = 1;
        for (let b = 0; b < n; b++) top = Math.max(top, GROUPS.reduce((t, g) => t + (o.counts[g]?.[b] ?? 0), 0));
        for (let b = 0; b < n; b++) {
          let col = ovBars[b];
          if (!col) {
            const parts = GROUPS.map((g) => h("span", { class: `g-${g}` }));
            const box = h("span", { class: "lfx-te-ov-b" }, ...parts);
            ovCell.append(box);
            col = ovBars[b] = [box, ...parts];
          }
          col[0].style.display = "";
          const per = GROUPS.map((g) => o.counts[g]?.[b] ?? 0);
          const sum = per.reduce((a, c) => a + c, 0);
          GROUPS.forEach((g, k) => (col[k + 1].style.height = `${(per[k] / top) * 100}%`));
          const t0 = o.lo + ((o.hi - o.lo) * b) / n - shared.span[0];
          col[0].title = `${sum.toLocaleString("en-US")} nodes start at ${fmtDuration(t0 * 1000) || "0 ms"}–${fmtDuration((t0 + (o.hi - o.lo) / n) * 1000) || "0 ms"}: ` + GROUPS.map((g, k) => `${per[k].toLocaleString("en-US")} ${g}`).join(" · ");
        }
        for (let b = n; b < ovBars.length; b++) ovBars[b][0].style.display = "none";
      }

      /** The rows as the view lists them: the window the page holds. */
      const view = {
        count: (): number => shared.win.total,
        idAt: (i: number): string | undefined => shared.win.at(i)?.node.id,
        indexOf: (id: string | null): number => shared.win.indexOf(id),
        hasKids: (id: string): boolean => !!shared.win.row(id)?.kids,
        isOpen: (id: string): boolean => !!shared.win.row(id)?.open,
        node: (id: string): TraceNode | undefined => shared.details.get(id) ?? shared.win.row(id)?.node,
      };

      // -- ask the kernel for the rows on screen plus a margin ------------------------------
      // One request in flight at a time: a scroll or toggle meanwhile only marks the view
      // stale, and the reply (or a retry when none comes) asks again for where the view is
      // then, so the page always ends on the rows of its last position. Replies carry the
      // request's sequence number; one older than what is shown is dropped.
      let applied = 0;
      let inflight: { req: number; at: number } | null = null;
      let retry = 0;
      const reqKeys = new Map<number, [string, string | null, string]>();
      let revealWanted = false;
      /** This view's name in its requests: a live trace's pushes say which view they are for. */
      const viewId = Math.random().toString(36).slice(2);
      let appliedMeta: [string, string | null, string] = ["", null, ""];
      let registered = false;
      let goWanted: number | null = null;
      const viewKey = () => `${shared.layout}|${shared.query.trim().toLowerCase()}`;
      function askAgainLater(ms: number): void {
        if (!retry) retry = window.setTimeout(() => { retry = 0; schedule(); }, ms);
      }
      function ensureWindow(a: number, b: number): void {
        const win = shared.win;
        const key = viewKey();
        const needSel = revealWanted && win.selected !== shared.selected;
        // a live trace: every view asks once, so the kernel knows what to push to it
        const tl = tlKey();
        if (win.covers(a, b, key) && !needSel && appliedMeta[2] === tl && (registered || !win.reply.live)) return;
        const now = performance.now();
        if (inflight && now - inflight.at < WINDOW_WAIT_MS) {
          askAgainLater(WINDOW_WAIT_MS - (now - inflight.at) + 10); // in case no reply comes
          return;
        }
        const req = ++windowRequests;
        const from = Math.max(0, a - MARGIN);
        reqKeys.set(req, [key, shared.selected, tl]);
        const [tlo, thi] = timeSpan();
        const timeline = !tl ? undefined : shared.view.zoom ? [tlo, thi, BUCKETS] : [null, null, BUCKETS];
        inflight = { req, at: now };
        if (trySend(model, { kind: KINDS.WINDOW_REQUEST, req, view: viewId, start: from, count: b - from + MARGIN, query: shared.query, expanded: [...shared.expanded.entries()], selected: shared.selected, timeline })) registered = true;
        else {
          inflight = null;
          reqKeys.delete(req);
          askAgainLater(500); // the comm is not ready: try again
        }
      }
      /** A live reply's trace-wide values (time span, totals, whether the trace ended). */
      function adoptLive(reply: WindowReply): void {
        if (!reply.live) return;
        if (Array.isArray(reply.span)) shared.span = [reply.span[0], reply.span[1]];
        if (reply.summary !== undefined) shared.summary = reply.summary ?? null;
        shared.ended = reply.ended === true;
        // a record fetched before its node changed (it ended, an approval came) is asked again
        for (const row of reply.rows) {
          const id = String(row.node.id);
          const held = shared.details.get(id);
          if (held && (held.status !== row.node.status || (held.end ?? null) !== (row.node.end ?? null))) {
            shared.details.delete(id);
            shared.requested.delete(id);
          }
        }
      }
      const onWindow = (reply: WindowReply) => {
        const req = typeof reply.req === "number" ? reply.req : 0;
        if (typeof reply.view === "string") {
          // a live push: the window of a request this view had answered, with what changed
          if (reply.view !== viewId || req !== applied) return;
          adoptLive(reply);
          shared.win.set(reply, appliedMeta[0], appliedMeta[1]);
          schedule();
          return;
        }
        const meta = reqKeys.get(req);
        reqKeys.delete(req);
        for (const k of reqKeys.keys()) if (k < req) reqKeys.delete(k); // answered in order
        if (!meta) return; // another view's request (numbers are unique across views)
        if (inflight && inflight.req <= req) inflight = null;
        if (req < applied) {
          schedule(); // stale: still look again at where the view is now
          return;
        }
        applied = req;
        appliedMeta = meta;
        adoptLive(reply);
        shared.win.set(reply, meta[0], meta[1]);
        if (revealWanted && meta[1] === shared.selected) {
          revealWanted = false;
          const i = shared.win.indexOf(shared.selected);
          if (i >= 0) reveal(i);
        }
        if (goWanted !== null) {
          const id = shared.win.at(goWanted)?.node.id;
          if (id) {
            goWanted = null;
            select(id, true);
          }
        }
        // the rows the reader is waiting for: drawn now, so the coming frame shows them (a
        // draw scheduled from here would run a frame later; one request is in flight at most)
        drawNow();
      };
      windowListeners.add(onWindow);

      function draw(): void {
        frame = 0;
        const t0 = performance.now();
        const win = shared.win;
        applyLayout();
        const roll = new Map<string, Rollup>();
        const problems = new Map<string, Record<string, number>>();
        for (const row of win.reply.rows) {
          roll.set(String(row.node.id), rollupOf(row));
          if (row.below) problems.set(String(row.node.id), row.below);
        }
        const count = view.count();
        spacer.style.height = `${count * ROW_H}px`;
        const [start, end] = windowRange(scroll.scrollTop, scroll.clientHeight || shared.view.height, ROW_H, count);
        ensureWindow(start, end);
        timing("rows", t0);
        const [lo, hi] = timeSpan();
        const at = (t: number) => fmtDuration((t - fullSpan()[0]) * 1000) || "0";
        const axisText = shared.view.timeline ? `${at(lo)}|${at(hi)}` : "";
        if (axis.dataset.total !== axisText) {
          axis.dataset.total = axisText;
          axis.textContent = "";
          if (axisText) axis.append(h("span", { text: at(lo) }), h("span", { text: at(hi) }));
        }
        const zoomed = !!shared.view.zoom;
        zoomOut.disabled = zoomReset.disabled = !zoomed;
        axis.title = zoomed ? "the zoomed range of the trace (⟲ shows all of it)" : "the whole trace";
        drawOverview(lo, hi);
        for (let i = start; i < end; i++) {
          const slot = i - start;
          let div = pool[slot];
          if (!div) {
            div = h("div", { class: "lfx-te-row", role: "treeitem" });
            pool[slot] = div;
            spacer.append(div);
          }
          div.style.top = `${i * ROW_H}px`;
          div.style.display = "";
          const row = win.at(i);
          if (!row) {
            // not fetched yet (a scroll far away): a placeholder until the window arrives
            if (div.dataset.key !== "pending") {
              div.dataset.key = "pending";
              delete div.dataset.id;
              div.className = "lfx-te-row lfx-te-pending";
              clear(div);
              div.append(h("span", { class: "lfx-te-label", text: "…" }));
            }
            continue;
          }
          const id = String(row.node.id);
          fillRow(div, id, view.node(id) ?? row.node, row.depth, row.kids, row.kids && row.open, !!row.match, roll.get(id), row.below);
          placeBar(div, row.node, lo, hi);
        }
        for (let s = end - start; s < pool.length; s++) pool[s].style.display = "none";
        const nodesN = win.reply.nodes;
        if (count === 0) {
          empty.style.display = "";
          empty.textContent = shared.query.trim()
            ? `No nodes match “${shared.query.trim()}”. Clear the filter to see all ${nodesN} ${plural(nodesN, "node")}.`
            : "No trace nodes yet.";
        } else empty.style.display = "none";
        const c = new Map(Object.entries(win.reply.counts.status));
        const live = !shared.closed && !shared.ended;
        const waitingN = live ? c.get("waiting") ?? 0 : 0;
        // the session root runs until disposed: only work under it counts as running
        const rootsRunning = win.reply.roots_running ?? 0;
        const running = live ? (c.get("running") ?? 0) + waitingN - rootsRunning : 0;
        const failed = BAD.reduce((n, k) => n + (c.get(k) ?? 0), 0);
        badge.textContent = waitingN ? `${waitingN} approval${waitingN > 1 ? "s" : ""} waiting` : "";
        badge.style.display = waitingN ? "" : "none";
        cancelButton.style.display = running > 0 ? "" : "none";
        closedBar.style.display = shared.closed ? "" : "none";
        closedBar.textContent = shared.closed;
        const sm = shared.summary;
        const unpricedN = typeof sm?.unpriced_requests === "number" ? sm.unpriced_requests : 0;
        const total = sm && (typeof sm.cost === "number" || unpricedN) ? ` · ${totalCostText(sm.cost, unpricedN, Array.isArray(sm.unpriced_models) ? sm.unpriced_models.map(String) : [])}` : "";
        const matches = win.reply.matches;
        summary.textContent = `${nodesN} ${plural(nodesN, "node")} · ${running} running · ${failed} failed/denied/cancelled${total}` +
          (shared.query && typeof matches === "number" ? ` · ${matches} match${matches === 1 ? "" : "es"}` : "") +
          (shared.query ? ` · ${count} shown` : "");
        drawDetail(roll, problems);
        timing("draw", t0);
        mark("drawn");
        const hook = (globalThis as any).__lfxTraceHook as Hook | undefined;
        if (hook) hook({ renderedAt: Date.now(), nodes: nodesN });
      }

      /** Position a row's timeline bar on the axis (a style update; the row is not rebuilt). */
      function placeBar(div: HTMLElement, node: TraceNode, lo: number, hi: number): void {
        const bar = div.querySelector(".lfx-te-bar-tl") as HTMLElement | null;
        if (!bar || typeof node.start !== "number") return;
        const status = String(node.status ?? "");
        const endT = typeof node.end === "number" ? node.end : isLive(status) && !shared.ended && !shared.closed ? Math.max(hi, shared.span[1]) : node.start;
        const place = barPlace(node.start, endT, lo, hi);
        const display = place ? "" : "none";
        if (bar.style.display !== display) bar.style.display = display;
        if (!place) return;
        const left = `${place[0].toFixed(3)}%`;
        const width = `${place[1].toFixed(3)}%`;
        if (bar.style.left !== left) bar.style.left = left;
        if (bar.style.width !== width) bar.style.width = width;
      }

      function fillRow(div: HTMLElement, id: string, node: TraceNode, depth: number, hasChildren: boolean, expanded: boolean, match: boolean, r: Rollup | undefined, belowCounts: Record<string, number> | undefined): void {
        const tl = shared.view.timeline;
        const gone = !!shared.closed;
        // rebuild the row's cells only when something it shows changed
        const below = belowText(belowCounts);
        const key = `${id}|${node.status}|${node.start}|${node.end}|${node.name}|${node.hint}|${!!node.error}|${humanWait(node)}|${hasChildren}|${expanded}|${match}|${shared.selected === id}|${r?.tokens}|${r?.cost}|${r?.priced}|${r?.unpriced}|${r?.descendants}|${depth}|${tl}|${below}|${shared.ended}|${gone}`;
        if (div.dataset.key === key) return;
        div.dataset.key = key;
        div.dataset.id = id;
        div.className = `lfx-te-row${shared.selected === id ? " lfx-sel" : ""}${match ? " lfx-match" : ""}`;
        div.setAttribute("aria-expanded", String(expanded));
        div.setAttribute("aria-selected", String(shared.selected === id));
        div.style.paddingLeft = `${depth * 14 + 2}px`;
        clear(div);
        const v = rowValuesOf(node, depth, r, belowCounts, shared.ended, gone);
        const still = ["running", "waiting for approval", "open"].includes(v.status);
        const label = h("span", { class: "lfx-te-label" }, h("span", { class: "lfx-te-name", text: v.name || id }));
        if (v.below) label.append(h("span", { class: "lfx-te-below", text: `(${v.below})` }));
        // a collapsed row says how many nodes it holds: nothing is hidden without a count
        if (hasChildren && !expanded && r && r.descendants) label.append(h("span", { class: "lfx-te-more", text: `${r.descendants.toLocaleString("en-US")} ${plural(r.descendants, "node")}` }));
        if (v.hint) label.append(h("span", { class: "lfx-te-hint", text: v.hint }));
        const cell = h("span", { class: "lfx-te-c lfx-te-c-tl" });
        const wait = humanWait(node);
        if (tl && typeof node.start === "number") {
          cell.append(h("span", { class: `lfx-te-bar-tl k-${v.kind || "node"} s-${v.status.replace(/\s+/g, "_")}${wait ? " w-human" : ""}` }));
        }
        div.append(
          h("span", { class: "lfx-te-caret", "data-caret": "1", text: hasChildren ? (expanded ? "▾" : "▸") : "" }),
          h("span", { class: "lfx-te-kind", text: v.kind || "node" }),
          label,
          h("span", { class: "lfx-te-c lfx-te-c-st" }, h("span", { class: stClass(v.status), text: v.status })),
          h("span", { class: "lfx-te-c lfx-te-c-dur lfx-dur", text: v.duration || (still ? "…" : "—") }),
          h("span", { class: "lfx-te-c lfx-te-c-tok", text: v.tokens }),
          h("span", { class: "lfx-te-c lfx-te-c-cost", text: costShort(v.cost) }),
          cell,
        );
        const tip = [`${v.kind || "node"} ${v.name || id}: ${v.status}${v.below ? ` (${v.below})` : ""}`, v.duration ? `duration ${v.duration}` : "duration —"];
        if (r && r.tokens) tip.push(`${r.tokens.toLocaleString("en-US")} tokens (this subtree)`);
        tip.push(`cost ${v.cost || "—"}`);
        if (v.wait) tip.push(`waiting for a person ${v.wait}`);
        if (node.error) tip.push(errorText(node.error));
        div.title = tip.join(" · ");
      }

      function section(label: string, value: unknown): void {
        detail.append(h("h4", {}, h("span", { text: label }), copyButton(() => (label === "Error" ? errorCopyText(value) : asText(value)))));
        detail.append(label === "Error" ? errorBox(value) : readable(value));
      }

      /** A tool call's wall time split into the tool's own time and a person's decision. */
      function timeSplit(node: TraceNode): [string, string][] {
        const total = durationMs(node);
        const wait = node.kind === "tool_call" ? humanWait(node) ?? 0 : 0;
        if (total === null || !wait) return [];
        const fmt = (s: number) => fmtDuration(s * 1000) || "0 ms";
        return [["total", fmt(total / 1000)], ["tool", fmt(Math.max(0, total / 1000 - wait))], ["waiting for a person", fmt(wait)]];
      }

      function drawDetail(roll: Map<string, Rollup>, problems: Map<string, Record<string, number>>): void {
        const id = shared.selected;
        const node = id ? view.node(id) : undefined;
        const win = shared.win;
        if (node && roll.has(node.id)) selInfo = { id: node.id, r: roll.get(node.id), below: problems.get(node.id) };
        const held = node && selInfo?.id === node.id ? selInfo : null;
        const hidden = !!node && !!shared.query.trim() && win.selected === id && win.reply.selected_index === -1; // filtered out
        const r = held?.r;
        const belowCounts = held?.below;
        const key = node ? `${id}:${shared.detailsVersion}:${node.status}:${node.end}:${hidden}:${r?.tokens}:${shared.ended}:${!!shared.closed}:${shared.details.has(node.id)}` : `none:${shared.query}`;
        if (key === detailFor) return;
        detailFor = key;
        clear(detail);
        if (!node || hidden) {
          detail.append(h("div", { class: "lfx-muted", text: hidden
            ? "The selected node is hidden by the filter."
            : "Select a node to see its details (click, or ↑/↓ then Enter)." }));
          return;
        }
        const dur = durationMs(node);
        const own = r?.own ?? 0;
        detail.append(
          h("div", {}, h("b", { text: String(node.name ?? node.id) }), " ", h("span", { class: stClass(statusLabel(node, shared.ended, !!shared.closed)), text: statusLabel(node, shared.ended, !!shared.closed) }),
            belowCounts ? h("span", { class: "lfx-te-below", text: `(${belowText(belowCounts)})` }) : ""),
          h("div", { class: "lfx-muted lfx-te-meta", text: [
            `${node.kind ?? "node"}`,
            `duration ${dur === null ? "—" : fmtDuration(dur)}`,
            r && r.tokens ? `tokens ${r.tokens.toLocaleString("en-US")} in this subtree (${own.toLocaleString("en-US")} in this node)` : "tokens —",
            `cost ${costText(r) || "—"}${r && r.priced ? " in this subtree" : " (no price known)"}`,
          ].join(" · ") }),
        );
        if (!shared.details.has(node.id)) {
          // rows carry summaries; the full record (prompt, response, args…) on demand
          if (!shared.requested.has(node.id)) {
            shared.requested.add(node.id);
            trySend(model, { kind: KINDS.DETAIL_REQUEST, id: node.id });
          }
          detail.append(h("div", { class: "lfx-muted", text: "loading details…" }));
        }
        const shown = new Set<string>();
        if (node.error != null && node.error !== "") {
          shown.add("error");
          section("Error", node.error);
        }
        const chat = conversation(node);
        if (chat) {
          detail.append(h("h4", {}, h("span", { text: "Conversation" }), copyButton(() => asText(chat))));
          detail.append(chatView(chat) ?? readable(chat));
          const out = node.outputs as Record<string, unknown> | undefined;
          if (out && typeof out === "object" && out.result !== undefined) section("Result", out.result);
        }
        const timing = timeSplit(node);
        if (timing.length) section("Time", Object.fromEntries(timing));
        const decision = node.decision as Record<string, any> | undefined;
        const inputs = node.inputs as Record<string, any> | undefined;
        for (const [k, label] of DETAIL_ORDER) {
          if (shown.has(k) || node[k] == null || node[k] === "") continue;
          shown.add(k);
          if (k === "inputs" && decision && decision.args && inputs && typeof inputs === "object") {
            // an edited call: what ran, what the model proposed, and the difference
            section("Arguments that ran (edited)", decision.args);
            section("Model's proposal", inputs.args ?? {});
            section("Changed", argChanges(inputs.args, decision.args));
            const rest = Object.fromEntries(Object.entries(inputs).filter(([key]) => key !== "args"));
            if (Object.keys(rest).length) section("Inputs", rest);
            continue;
          }
          if (k === "decision" && decision) {
            // its times as local times; edited arguments have their own sections
            const shown: Record<string, unknown> = {};
            for (const [key, value] of Object.entries(decision)) {
              if (key === "args" || value == null) continue;
              const text = key === "asked_at" || key === "decided_at" ? localTime(value, shared.offset) : value;
              if (text !== "") shown[key] = text;
            }
            section(label, shown);
            continue;
          }
          section(label, node[k]);
        }
        for (const [k, v] of Object.entries(node)) {
          if (shown.has(k) || SUMMARY_KEYS.has(k) || v == null || v === "") continue;
          section(k, v);
        }
      }

      function reveal(i: number): void {
        const top = i * ROW_H;
        if (top < scroll.scrollTop) scroll.scrollTop = top;
        else if (top + ROW_H > scroll.scrollTop + scroll.clientHeight) scroll.scrollTop = top + ROW_H - scroll.clientHeight;
      }

      function select(id: string | null, show = false): void {
        shared.selected = id;
        if (show && id) {
          const i = view.indexOf(id);
          if (i >= 0) reveal(i);
          else revealWanted = true; // the kernel says where it is
        }
        notify();
      }

      function toggleMax(on?: boolean): void {
        shared.view.max = on ?? !shared.view.max;
        applyLayout(); // now, so the pane that gets the focus is visible
        (shared.view.max ? detail : scroll).focus();
        notify();
      }

      cancelButton.addEventListener("click", () => {
        cancelButton.disabled = true;
        if (!trySend(model, { kind: KINDS.CANCEL })) closeAll();
        setTimeout(() => (cancelButton.disabled = false), 2000);
      });
      /** The kernel is gone: nothing shown can still be running. */
      function closeAll(): void {
        if (shared.closed) return;
        shared.closed = "kernel restarted or shut down — live updates stopped; what is shown is the last state received";
        for (const l of shared.listeners) l();
      }
      const stopWatching = onKernelGone(el, model, closeAll);
      scroll.addEventListener("scroll", () => {
        askNow();
        schedule();
      });
      scroll.addEventListener("click", (ev) => {
        const target = ev.target as HTMLElement;
        const rowEl = target.closest(".lfx-te-row") as HTMLElement | null;
        if (!rowEl?.dataset.id) return;
        const id = rowEl.dataset.id;
        if (target.dataset.caret && view.hasKids(id)) {
          shared.expanded.set(id, !view.isOpen(id));
          shared.layout++;
          notify();
        } else select(id);
      });
      scroll.addEventListener("dblclick", (ev) => {
        if ((ev.target as HTMLElement).closest(".lfx-te-row")) toggleMax(true);
      });
      scroll.addEventListener("keydown", (ev) => {
        const n = view.count();
        if (!n) return;
        const idx = view.indexOf(shared.selected);
        const id = idx >= 0 ? view.idAt(idx) ?? shared.selected : null;
        const page = Math.max(1, Math.floor((scroll.clientHeight || shared.view.height) / ROW_H) - 1);
        const go = (i: number) => {
          const at = Math.max(0, Math.min(n - 1, i));
          const target = view.idAt(at);
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
          case "ArrowRight":
          case "ArrowLeft": {
            if (!id) { go(0); break; }
            const open = view.isOpen(id) && view.hasKids(id);
            if (ev.key === "ArrowRight" && view.hasKids(id) && !open) {
              shared.expanded.set(id, true);
              shared.layout++;
              notify();
            } else if (ev.key === "ArrowLeft" && open) {
              shared.expanded.set(id, false);
              shared.layout++;
              notify();
            } else if (ev.key === "ArrowLeft") {
              const parent = view.node(id)?.parent_id;
              if (parent != null) select(parent, true);
            } else if (ev.key === "ArrowRight") go(idx + 1);
            break;
          }
          case "Enter": if (id) toggleMax(true); break;
          case "+": case "=": setZoom(zoomBy(fullSpan(), shared.view.zoom, 0.5)); break;
          case "-": setZoom(zoomBy(fullSpan(), shared.view.zoom, 2)); break;
          case "0": setZoom(null); break;
          case "[": setZoom(panBy(fullSpan(), shared.view.zoom, -0.25)); break;
          case "]": setZoom(panBy(fullSpan(), shared.view.zoom, 0.25)); break;
          default: return;
        }
        ev.preventDefault();
      });
      root.addEventListener("keydown", (ev) => {
        const t = ev.target as HTMLElement;
        const typing = t.tagName === "INPUT" || t.tagName === "TEXTAREA";
        if (ev.key === "/" && !typing) {
          ev.preventDefault();
          ev.stopPropagation();
          search.focus();
          search.select();
        } else if (ev.key === "Escape" && shared.view.max) {
          ev.stopPropagation();
          toggleMax(false);
        } else if (ev.key === "Escape" && t === search) {
          scroll.focus();
        }
      });
      timelineBtn.addEventListener("click", () => {
        shared.view.timeline = !shared.view.timeline;
        notify();
      });
      maxBtn.addEventListener("click", () => toggleMax());
      zoomIn.addEventListener("click", () => setZoom(zoomBy(fullSpan(), shared.view.zoom, 0.5)));
      zoomOut.addEventListener("click", () => setZoom(zoomBy(fullSpan(), shared.view.zoom, 2)));
      zoomReset.addEventListener("click", () => setZoom(null));
      // the wheel over the overview strip or the axis zooms around the pointer
      const onWheel = (ev: WheelEvent) => {
        const box = (ev.currentTarget as HTMLElement).getBoundingClientRect();
        if (!box.width || !ev.deltaY) return;
        ev.preventDefault();
        setZoom(zoomBy(fullSpan(), shared.view.zoom, ev.deltaY < 0 ? 0.8 : 1.25, (ev.clientX - box.left) / box.width));
      };
      ovCell.addEventListener("wheel", onWheel, { passive: false });
      axis.addEventListener("wheel", onWheel, { passive: false });
      // a click on a bucket zooms in on it
      ovCell.addEventListener("click", (ev) => {
        const box = ovCell.getBoundingClientRect();
        if (box.width) setZoom(zoomBy(fullSpan(), shared.view.zoom, 0.25, (ev.clientX - box.left) / box.width));
      });
      split.addEventListener("pointerdown", (ev) => {
        ev.preventDefault();
        split.setPointerCapture(ev.pointerId);
        const box = main.getBoundingClientRect();
        const move = (e: PointerEvent) => {
          shared.view.split = Math.min(0.8, Math.max(0.2, (e.clientX - box.left) / box.width));
          for (const l of shared.listeners) l();
        };
        const up = () => {
          split.removeEventListener("pointermove", move);
          split.removeEventListener("pointerup", up);
          saveView(model);
        };
        split.addEventListener("pointermove", move);
        split.addEventListener("pointerup", up);
      });
      // The main area is resizable (CSS resize); keep the chosen height.
      const sizes = new ResizeObserver(() => {
        const w = root.getBoundingClientRect().width;
        root.classList.toggle("lfx-narrow", w > 0 && w < NARROW_PX);
        const hpx = Math.round(main.getBoundingClientRect().height);
        if (!shared.view.max && hpx >= 160 && Math.abs(hpx - shared.view.height) > 4) {
          shared.view.height = hpx;
          layoutKey = `${shared.view.timeline}|${shared.view.split}|${hpx}|${shared.view.max}`;
          saveView(model);
          schedule();
        }
      });
      sizes.observe(root);
      sizes.observe(main);
      let searchTimer: ReturnType<typeof setTimeout> | undefined;
      search.addEventListener("input", () => {
        clearTimeout(searchTimer);
        searchTimer = setTimeout(() => {
          searchTimer = undefined;
          shared.query = search.value;
          notify();
        }, 120);
      });
      const onTitle = () => (title.textContent = model.get("title") || "Trace");
      model.on("change:title", onTitle);
      const listener = () => {
        // (a filter typed and not yet applied is kept: a redraw meanwhile must not undo it)
        if (search.value !== shared.query && document.activeElement !== search && searchTimer === undefined) search.value = shared.query;
        schedule();
      };
      shared.listeners.add(listener);
      schedule();
      trySend(model, { kind: KINDS.SYNC, seq: shared.seq });
      return () => {
        stopWatching();
        shared.listeners.delete(listener);
        windowListeners.delete(onWindow);
        clearTimeout(retry);
        model.off("change:title", onTitle);
        sizes.disconnect();
        if (frame) cancelAnimationFrame(frame);
      };
    },
  };
};
