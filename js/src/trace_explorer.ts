// TraceExplorer view: a virtualized tree (only rows on screen are in the DOM), search that
// keeps ancestors of matches, a detail pane, expand state shared by all views of the model.
import { KINDS } from "./kinds";
import { clear, errorText, fmtCost, fmtDuration, h, injectCss, jsonTree, localTime, onKernelGone, trySend, markLive } from "./dom";
import { BAD, Patch, RowModel, TraceNode, TraceStore, argChanges, belowText, durationMs, problemsBelow, windowRange } from "./tree";

const ROW_H = 22;
const VIEWPORT_H = 360;

interface Model {
  get(name: string): any;
  on(event: string, cb: (...args: any[]) => void): void;
  off(event?: string, cb?: (...args: any[]) => void): void;
  send(content: unknown): void;
}

interface Shared {
  store: TraceStore;
  expanded: Map<string, boolean>;
  selected: string | null;
  query: string;
  seq: number;
  layout: number;
  requested: Set<string>;
  summary: Record<string, any> | null;
  offset: number | null;
  closed: string;
  listeners: Set<(patches: Patch[]) => void>;
}

const WAITING = "waiting for approval";
const stClass = (status: string) => `lfx-st lfx-st-${status.replace(/\s+/g, "_")}`;
/** A session's root runs until the session is disposed: between runs it is "open", not busy. */
const shownStatus = (node: TraceNode) => (node.kind === "session" && node.status === "running" ? "open" : String(node.status ?? ""));

function fmtS(seconds: number): string {
  return fmtDuration(seconds * 1000) || "0 ms";
}



type Hook = (info: { patches: Patch[]; renderedAt: number; nodes: number }) => void;

const CSS = `
.lfx-te{border:1px solid var(--jp-border-color2,#ddd);border-radius:4px}
.lfx-te-bar{display:flex;gap:8px;align-items:center;padding:4px 6px;border-bottom:1px solid var(--jp-border-color2,#ddd)}
.lfx-te-bar input{flex:1;min-width:80px}
.lfx-te-main{display:flex}
.lfx-te-scroll{flex:3;height:${VIEWPORT_H}px;overflow:auto;position:relative}
.lfx-te-row{position:absolute;left:0;right:0;height:${ROW_H}px;display:flex;align-items:center;gap:6px;white-space:nowrap;cursor:pointer;padding-right:6px;box-sizing:border-box}
.lfx-te-row:hover{background:var(--jp-layout-color2,#f3f3f3)}
.lfx-te-row.lfx-sel{background:var(--jp-brand-color3,#dbe8fb)}
.lfx-te-row.lfx-match .lfx-te-name{text-decoration:underline dotted}
.lfx-te-caret{width:14px;text-align:center;flex:none;color:#666}
.lfx-te-kind{font-size:10px;color:#555;border:1px solid #ccc;border-radius:3px;padding:0 3px;flex:none}
.lfx-te-name{overflow:hidden;text-overflow:ellipsis;flex:1}
.lfx-te-num{color:#666;font-size:11px;flex:none}
.lfx-te-detail{flex:2;border-left:1px solid var(--jp-border-color2,#ddd);padding:6px;height:${VIEWPORT_H}px;overflow:auto;box-sizing:border-box}
.lfx-te-detail h4{margin:6px 0 2px 0;font-size:12px}
.lfx .lfx-st-waiting_for_approval{background:#f9ab00;color:#000}
.lfx .lfx-st-unfinished,.lfx .lfx-st-open{background:#eee;color:#555}
.lfx-te-below{color:#b3261e;font-size:11px;flex:none}
.lfx-te-badge{background:#f9ab00;color:#000;border-radius:8px;padding:0 6px;font-size:11px;white-space:nowrap}
.lfx-te-closed{background:#fef7e0;color:#8a5a00;padding:2px 6px}
`;

const DETAIL_ORDER: [string, string][] = [
  ["error", "Error"],
  ["messages", "Prompt messages"],
  ["prompt", "Prompt"],
  ["inputs", "Inputs"],
  ["args", "Tool arguments"],
  ["raw_response", "Raw response"],
  ["response", "Response"],
  ["parsed", "Parsed result"],
  ["outputs", "Output"],
  ["decision", "Policy decision"],
  ["usage", "Usage"],
];
const SUMMARY_KEYS = new Set(["id", "parent", "kind", "name", "status", "start", "end", "cost", "partial", "wait_s"]);

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

function createShared(): Shared {
  return { store: new TraceStore(), expanded: new Map(), selected: null, query: "", seq: 0, layout: 0, requested: new Set(), summary: null, offset: null, closed: "", listeners: new Set() };
}

export default () => {
  const shared = createShared();
  let pendingPatches: Patch[] = [];

  /** The state trait / snapshot buffer: UTF-8 JSON bytes (a DataView in anywidget). */
  function decode(raw: any): any {
    if (!raw) return null;
    const t0 = performance.now();
    try {
      return decodeRaw(raw);
    } finally {
      timing("decode", t0);
    }
  }

  function decodeRaw(raw: any): any {
    if (raw instanceof DataView || ArrayBuffer.isView(raw)) {
      const view = raw as ArrayBufferView;
      const text = new TextDecoder().decode(new Uint8Array(view.buffer, view.byteOffset, view.byteLength));
      return text ? JSON.parse(text) : null;
    }
    if (raw instanceof ArrayBuffer) return JSON.parse(new TextDecoder().decode(new Uint8Array(raw)));
    return typeof raw === "object" ? raw : null;
  }

  function applyState(state: any): void {
    if (state && Array.isArray(state.nodes)) {
      const t0 = performance.now();
      shared.store.load(state.nodes as TraceNode[]);
      timing("store.load", t0);
      shared.summary = state.summary ?? null;
      shared.offset = typeof state.offset === "number" ? state.offset : shared.offset;
      shared.seq = typeof state.seq === "number" ? state.seq : shared.seq;
    }
  }

  return {
    initialize({ model }: { model: Model }) {
      mark("initialize");
      applyState(decode(model.get("state")));
      // The synced state trait: newer than what this page has seen (page reload, a state set
      // after the widget opened, a saved trace) → adopt it. Equal seq: already applied live.
      model.on("change:state", () => {
        // Once live batches arrive they are the truth; a later trait copy has the same seq,
        // and decoding megabytes of it would only stall the page.
        if (shared.seq > 0) return;
        const state = decode(model.get("state"));
        if (!state || typeof state.seq !== "number") return;
        if (state.seq > shared.seq || (state.seq === 0 && shared.seq === 0)) {
          applyState(state);
          for (const l of shared.listeners) l([]);
        }
      });
      model.on("msg:custom", (msg: any, buffers?: any[]) => {
        if (msg?.kind === KINDS.EVENTS) {
          if (typeof msg.seq === "number" && msg.seq <= shared.seq) return; // already in a snapshot
          shared.seq = msg.seq ?? shared.seq;
          const patches = msg.events as Patch[];
          for (const p of patches) {
            if (p.op === "summary") shared.summary = (p.summary as Record<string, any>) ?? null;
            else shared.store.apply(p);
          }
          for (const l of shared.listeners) l(patches);
        } else if (msg?.kind === KINDS.DETAIL && msg.node) {
          shared.store.apply({ ...msg.node, op: "node", id: String(msg.id), partial: false });
          for (const l of shared.listeners) l([]);
        } else if (msg?.kind === KINDS.SNAPSHOT) {
          applyState({ ...(msg.state ?? decode(buffers?.[0])), seq: msg.seq });
          for (const l of shared.listeners) l([]);
        }
      });
    },

    render({ model, el }: { model: Model; el: HTMLElement }) {
      const root = h("div", { class: "lfx lfx-te" });
      injectCss(root, CSS);
      const title = h("b", { text: model.get("title") || "Trace" });
      const search = h("input", { type: "search", placeholder: "filter: name, kind, status, error…" }) as HTMLInputElement;
      search.value = shared.query;
      const summary = h("span", { class: "lfx-muted" });
      const badge = h("span", { class: "lfx-te-badge", style: "display:none" });
      const cancelButton = h("button", { class: "lfx-te-cancel", text: "Cancel run", style: "display:none", title: "Cancel the run this trace follows; a tool waiting for approval does not run" }) as HTMLButtonElement;
      const closedBar = h("div", { class: "lfx-te-closed", style: "display:none" });
      const scroll = h("div", { class: "lfx-te-scroll", role: "tree", tabindex: 0 });
      const spacer = h("div", { style: "position:relative;width:100%" });
      scroll.append(spacer);
      const detail = h("div", { class: "lfx-te-detail" });
      root.append(h("div", { class: "lfx-te-bar" }, title, search, badge, summary, cancelButton), closedBar, h("div", { class: "lfx-te-main" }, scroll, detail));
      el.append(root);
      markLive(el);

      const rows = new RowModel(shared.store);
      let problems = new Map<string, Record<string, number>>();
      let problemsVersion = -1;
      let frame = 0;
      let detailFor = "";
      const pool: HTMLElement[] = [];

      const schedule = (patches: Patch[]) => {
        pendingPatches = pendingPatches.concat(patches);
        if (!frame) frame = requestAnimationFrame(draw);
      };

      function draw(): void {
        frame = 0;
        const t0 = performance.now();
        const store = shared.store;
        rows.update(shared.expanded, shared.query, String(shared.layout));
        timing("rows", t0);
        const count = rows.ids.length;
        spacer.style.height = `${count * ROW_H}px`;
        // short traces get a short pane; long ones scroll inside VIEWPORT_H
        const paneH = `${Math.min(VIEWPORT_H, Math.max(count, 8) * ROW_H + 2)}px`;
        if (scroll.style.height !== paneH) {
          scroll.style.height = paneH;
          detail.style.height = paneH;
        }
        const [start, end] = windowRange(scroll.scrollTop, scroll.clientHeight || VIEWPORT_H, ROW_H, count);
        const t1 = performance.now();
        const roll = store.rollups();
        if (problemsVersion !== store.version) {
          problems = problemsBelow(store);
          problemsVersion = store.version;
        }
        timing("rollups", t1);
        for (let i = start; i < end; i++) {
          const id = rows.ids[i];
          const slot = i - start;
          let div = pool[slot];
          if (!div) {
            div = h("div", { class: "lfx-te-row", role: "treeitem" });
            pool[slot] = div;
            spacer.append(div);
          }
          fillRow(div, id, store.nodes.get(id)!, roll.get(id));
          div.style.top = `${i * ROW_H}px`;
          div.style.display = "";
        }
        for (let s = end - start; s < pool.length; s++) pool[s].style.display = "none";
        const c = store.statusCounts;
        const waitingN = c.get(WAITING) ?? 0;
        const running = (c.get("running") ?? 0) + waitingN;
        const failed = BAD.reduce((n, k) => n + (c.get(k) ?? 0), 0);
        badge.textContent = waitingN ? `${waitingN} approval${waitingN > 1 ? "s" : ""} waiting` : "";
        badge.style.display = waitingN && !shared.closed ? "" : "none";
        // the session root runs until disposed: only work under it makes a run cancellable
        const rootsRunning = store.roots().filter((id) => ["running", WAITING].includes(String(store.nodes.get(id)?.status))).length;
        cancelButton.style.display = running > rootsRunning && !shared.closed ? "" : "none";
        closedBar.style.display = shared.closed ? "" : "none";
        closedBar.textContent = shared.closed;
        summary.textContent = `${store.nodes.size} nodes · ${running - rootsRunning} running · ${failed} failed/denied/cancelled` +
          (typeof shared.summary?.cost === "number" ? ` · ${fmtCost(shared.summary.cost) || "$0"} total` : "") +
          (shared.query ? ` · ${count} shown` : "");
        drawDetail();
        timing("draw", t0);
        mark("drawn");
        const patches = pendingPatches;
        pendingPatches = [];
        const hook = (globalThis as any).__lfxTraceHook as Hook | undefined;
        if (hook) hook({ patches, renderedAt: Date.now(), nodes: store.nodes.size });
      }

      // expansion is shared by all views of this model: a shared counter says it changed
      const bumpLayout = () => shared.layout++;
      function fillRow(div: HTMLElement, id: string, node: TraceNode, r: { tokens: number; cost: number } | undefined): void {
        const kids = shared.store.children(id);
        const hasChildren = rows.matches ? kids.some((k) => rows.depth.has(k)) : kids.length > 0;
        const expanded = hasChildren && rows.isOpen(id, shared.expanded);
        const match = rows.matches?.has(id) ?? false;
        // rebuild the row's cells only when something it shows changed
        const below = belowText(problems.get(id));
        const key = `${id}|${shared.store.stamp(id)}|${hasChildren}|${expanded}|${match}|${shared.selected === id}|${r?.tokens}|${r?.cost}|${rows.depth.get(id)}|${below}`;
        if (div.dataset.key === key) return;
        div.dataset.key = key;
        div.dataset.id = id;
        div.className = `lfx-te-row${shared.selected === id ? " lfx-sel" : ""}${match ? " lfx-match" : ""}`;
        div.setAttribute("aria-expanded", String(expanded));
        div.style.paddingLeft = `${(rows.depth.get(id) ?? 0) * 14 + 2}px`;
        clear(div);
        const status = shownStatus(node);
        div.append(
          h("span", { class: "lfx-te-caret", "data-caret": "1", text: hasChildren ? (expanded ? "▾" : "▸") : "" }),
          h("span", { class: "lfx-te-kind", text: String(node.kind ?? "node") }),
          h("span", { class: "lfx-te-name", text: String(node.name ?? id) }),
          h("span", { class: stClass(status), text: status }),
          below ? h("span", { class: "lfx-te-below", text: `(${below})` }) : "",
          h("span", { class: "lfx-te-num", text: fmtDuration(durationMs(node)) }),
          h("span", { class: "lfx-te-num", text: r && r.tokens ? `${r.tokens} tok` : "" }),
          h("span", { class: "lfx-te-num", text: r ? fmtCost(r.cost) : "" }),
        );
        if (node.error) div.title = errorText(node.error);
        else div.removeAttribute("title");
      }

      /** Wall time split into model, tool and human-wait time (the node and its subtree). */
      function timeSplit(node: TraceNode): [string, string][] {
        const total = durationMs(node);
        if (total === null) return [];
        let model = 0;
        let tool = 0;
        let wait = 0;
        const stack = [node.id];
        while (stack.length) {
          const id = stack.pop()!;
          const n = shared.store.nodes.get(id);
          if (!n) continue;
          const d = (durationMs(n) ?? 0) / 1000;
          const w = typeof n.wait_s === "number" ? n.wait_s : 0;
          if (n.kind === "query") model += d;
          else if (n.kind === "tool_call") {
            tool += Math.max(0, d - w);
            wait += w;
          }
          if (n.kind !== "query" && n.kind !== "tool_call") stack.push(...shared.store.children(id));
        }
        if (!wait && !(model && tool)) return [];
        const out: [string, string][] = [["total", fmtS(total / 1000)]];
        if (model) out.push(["model", fmtS(model)]);
        if (tool || node.kind === "tool_call") out.push(["tool", fmtS(tool)]);
        if (wait) out.push(["waiting for a person", fmtS(wait)]);
        return out;
      }

      function drawDetail(): void {
        const id = shared.selected;
        const node = id ? shared.store.nodes.get(id) : undefined;
        const key = node ? `${id}:${shared.store.version}` : "";
        if (key === detailFor) return;
        detailFor = key;
        clear(detail);
        if (!node) {
          detail.append(h("div", { class: "lfx-muted", text: "Select a node to see its details." }));
          return;
        }
        const r = shared.store.rollups().get(node.id);
        const below = belowText(problemsBelow(shared.store).get(node.id));
        detail.append(
          h("div", {}, h("b", { text: String(node.name ?? node.id) }), " ", h("span", { class: stClass(shownStatus(node)), text: shownStatus(node) }),
            below ? h("span", { class: "lfx-te-below", text: ` (${below})` }) : ""),
          h("div", { class: "lfx-muted", text: `${node.kind ?? "node"} · ${fmtDuration(durationMs(node)) || "—"}` +
            (r ? ` · ${r.tokens} tokens · ${fmtCost(r.cost) || "$0"} (incl. ${r.descendants} below)` : "") }),
        );
        if (node.partial) {
          // snapshots carry summaries; the full record (prompt, response, args…) on demand
          if (!shared.requested.has(node.id)) {
            shared.requested.add(node.id);
            trySend(model, { kind: KINDS.DETAIL_REQUEST, id: node.id });
          }
          detail.append(h("div", { class: "lfx-muted", text: "loading details…" }));
        }
        const shown = new Set<string>();
        const timing = timeSplit(node);
        if (timing.length) {
          detail.append(h("h4", { text: "Time" }), h("ul", { class: "lfx-json lfx-te-time" }, ...timing.map(([k, v]) => h("li", {}, h("span", { class: "lfx-key", text: `${k}: ` }), v))));
        }
        const decision = node.decision as Record<string, any> | undefined;
        const inputs = node.inputs as Record<string, any> | undefined;
        for (const [k, label] of DETAIL_ORDER) {
          if (node[k] == null || node[k] === "") continue;
          shown.add(k);
          if (k === "inputs" && decision && decision.args && typeof inputs === "object") {
            // an edited call: what ran, what the model proposed, and the difference
            detail.append(h("h4", { text: "Arguments that ran (edited)" }), jsonTree(decision.args));
            detail.append(h("h4", { text: "Model's proposal" }), jsonTree(inputs.args ?? {}));
            detail.append(h("h4", { text: "Changed" }), h("ul", { class: "lfx-json lfx-te-diff" }, ...argChanges(inputs.args, decision.args).map((t) => h("li", { text: t }))));
            const rest = Object.fromEntries(Object.entries(inputs).filter(([key]) => key !== "args"));
            if (Object.keys(rest).length) detail.append(h("h4", { text: "Inputs" }), jsonTree(rest));
            continue;
          }
          if (k === "decision" && decision) {
            const { args: _args, at, ...rest } = decision;
            const when = localTime(at, shared.offset);
            detail.append(h("h4", { text: label }), jsonTree(when ? { ...rest, at: when } : rest));
            continue;
          }
          detail.append(h("h4", { text: label }));
          detail.append(k === "error" ? h("div", { class: "lfx-err", text: errorText(node[k]) }) : jsonTree(node[k]));
        }
        for (const [k, v] of Object.entries(node)) {
          if (shown.has(k) || SUMMARY_KEYS.has(k) || v == null || v === "") continue;
          detail.append(h("h4", { text: k }), jsonTree(v));
        }
      }

      cancelButton.addEventListener("click", () => {
        cancelButton.disabled = true;
        if (!trySend(model, { kind: KINDS.CANCEL })) closeAll();
        setTimeout(() => (cancelButton.disabled = false), 2000);
      });
      function closeAll(): void {
        if (shared.closed) return;
        shared.closed = "kernel restarted or shut down — live updates stopped; what is shown is the last state received";
        for (const n of shared.store.nodes.values()) {
          if (n.status === "running" || n.status === WAITING) shared.store.apply({ op: "node", id: n.id, status: "unfinished" } as Patch);
        }
        for (const l of shared.listeners) l([]);
      }
      const stopWatching = onKernelGone(el, model, closeAll);
      scroll.addEventListener("scroll", () => schedule([]));
      scroll.addEventListener("click", (ev) => {
        const target = ev.target as HTMLElement;
        const rowEl = target.closest(".lfx-te-row") as HTMLElement | null;
        if (!rowEl?.dataset.id) return;
        const id = rowEl.dataset.id;
        if (target.dataset.caret && shared.store.children(id).length) {
          shared.expanded.set(id, !rows.isOpen(id, shared.expanded));
          bumpLayout();
        } else shared.selected = id;
        for (const l of shared.listeners) l([]);
      });
      scroll.addEventListener("keydown", (ev) => {
        const idx = shared.selected === null ? -1 : rows.ids.indexOf(shared.selected);
        const id = idx >= 0 ? rows.ids[idx] : null;
        if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
          const next = rows.ids[Math.max(0, Math.min(rows.ids.length - 1, idx + (ev.key === "ArrowDown" ? 1 : -1)))];
          if (next) shared.selected = next;
        } else if ((ev.key === "ArrowRight" || ev.key === "ArrowLeft") && id && shared.store.children(id).length) {
          shared.expanded.set(id, ev.key === "ArrowRight");
          bumpLayout();
        } else return;
        ev.preventDefault();
        for (const l of shared.listeners) l([]);
      });
      let searchTimer: ReturnType<typeof setTimeout> | undefined;
      search.addEventListener("input", () => {
        clearTimeout(searchTimer);
        searchTimer = setTimeout(() => {
          shared.query = search.value;
          for (const l of shared.listeners) l([]);
        }, 120);
      });
      const onTitle = () => (title.textContent = model.get("title") || "Trace");
      model.on("change:title", onTitle);
      const listener = (patches: Patch[]) => {
        if (patches.length === 0) {
          if (search.value !== shared.query && document.activeElement !== search) search.value = shared.query;
        }
        schedule(patches);
      };
      shared.listeners.add(listener);
      schedule([]);
      trySend(model, { kind: KINDS.SYNC, seq: shared.seq });
      return () => {
        stopWatching();
        shared.listeners.delete(listener);
        model.off("change:title", onTitle);
        if (frame) cancelAnimationFrame(frame);
      };
    },
  };
};
