// Pure trace-tree logic (no DOM): the store the live events merge into, roll-ups, the
// filtered/expanded list of visible rows, the virtual window, and what each row shows (status
// label, sums, duration, human wait). Nodes carry the core's field names (TraceNode.to_json,
// "The node contract" in docs/agentic.md). Unit-tested in js/test; trace_parity.json holds
// the row values to what the static copy (langfx_nb/notebook/trace_rows.py) computes.
import type { Buckets } from "./timeline";
import { fmtCost, fmtDuration } from "./dom";

export interface TraceNode {
  id: string;
  parent_id?: string | null;
  kind?: string;
  name?: string;
  status?: string;
  start?: number | null;
  end?: number | null;
  usage?: Record<string, number | null> | null;
  cost?: number | null;
  error?: unknown;
  [key: string]: unknown;
}

export interface Patch {
  op: string;
  id?: string;
  [key: string]: unknown;
}

export interface Rollup {
  tokens: number;
  cost: number;
  descendants: number;
  /** How many nodes of the subtree carry a known cost (0: the cost is unknown, not $0). */
  priced: number;
  /** How many nodes of the subtree used tokens with no known cost (left out of `cost`:
   * with `priced` too, the sum is partial and labelled so). Absent: 0. */
  unpriced?: number;
  /** The node's own tokens, when the kernel computed the roll-up (a windowed trace). */
  own?: number;
}

export interface Row {
  id: string;
  depth: number;
  hasChildren: boolean;
  expanded: boolean;
  match: boolean;
}

export class TraceStore {
  nodes = new Map<string, TraceNode>();
  /** Bumped on every change; derived data is cached per version. */
  version = 0;
  /** Bumped when the tree changed in a way incremental consumers cannot follow (a node moved,
   *  an orphan found its parent, a reload). Consumers then rebuild from scratch. */
  epoch = 0;
  /** Ids in creation order: consumers remember how far they have read. */
  created: string[] = [];
  /** Count of nodes per status, kept exact on every change. */
  statusCounts = new Map<string, number>();
  private kids = new Map<string, string[]>();
  private rootIds: string[] = [];
  /** Parent ids that orphans point at (their arrival restructures the tree). */
  private waiting = new Set<string>();
  private structureEpoch = -1;
  private roll = new Map<string, Rollup>();
  private own = new Map<string, [number, number, number, number]>();
  private rollEpoch = -1;

  private stamps = new Map<string, number>();

  /** The store version at which this node last changed (for cheap "did it change?" checks). */
  stamp(id: string): number {
    return this.stamps.get(id) ?? 0;
  }

  apply(patch: Patch): void {
    if (patch.op !== "node" || typeof patch.id !== "string") return;
    const { op: _op, ...fields } = patch;
    const id = patch.id;
    const current = this.nodes.get(id);
    this.version++;
    this.stamps.set(id, this.version);
    if (current) {
      const oldStatus = String(current.status ?? "");
      const oldParent = current.parent_id ?? null;
      Object.assign(current, fields);
      if ("parent_id" in fields && (current.parent_id ?? null) !== oldParent) this.epoch++;
      if (String(current.status ?? "") !== oldStatus) {
        this.count(oldStatus, -1);
        this.count(String(current.status ?? ""), 1);
      }
      this.updateOwn(current);
      return;
    }
    const node = { status: "running", parent_id: null, ...fields } as TraceNode;
    this.nodes.set(id, node);
    this.created.push(id);
    this.count(String(node.status ?? ""), 1);
    if (this.waiting.has(id)) this.epoch++; // its children arrived first: rebuild lazily
    if (this.structureEpoch === this.epoch) {
      const parent = node.parent_id;
      if (parent != null && parent !== id && this.nodes.has(parent)) {
        let list = this.kids.get(parent);
        if (!list) this.kids.set(parent, (list = []));
        list.push(id);
      } else {
        this.rootIds.push(id);
        if (parent != null) this.waiting.add(parent);
      }
    }
    if (this.rollEpoch === this.epoch) {
      const t = tokensOf(node);
      const c = costOf(node);
      const p = hasCost(node) ? 1 : 0;
      const u = unpricedOf(node);
      this.own.set(id, [t, c, p, u]);
      this.roll.set(id, { tokens: t, cost: c, descendants: 0, priced: p, unpriced: u });
      for (const a of this.ancestors(id)) {
        const r = this.roll.get(a);
        if (r) {
          r.tokens += t;
          r.cost += c;
          r.descendants += 1;
          r.priced += p;
          r.unpriced = (r.unpriced ?? 0) + u;
        }
      }
    }
  }

  load(nodes: TraceNode[]): void {
    this.nodes.clear();
    this.stamps.clear();
    this.created = [];
    this.statusCounts.clear();
    for (const n of nodes) {
      const id = String(n.id);
      this.nodes.set(id, { ...n, id });
      this.created.push(id);
      this.count(String(n.status ?? ""), 1);
    }
    this.version++;
    this.epoch++;
    for (const id of this.created) this.stamps.set(id, this.version);
  }

  private count(status: string, delta: number): void {
    this.statusCounts.set(status, (this.statusCounts.get(status) ?? 0) + delta);
  }

  private updateOwn(node: TraceNode): void {
    if (this.rollEpoch !== this.epoch) return;
    const prev = this.own.get(node.id) ?? [0, 0, 0, 0];
    const t = tokensOf(node);
    const c = costOf(node);
    const p = hasCost(node) ? 1 : 0;
    const u = unpricedOf(node);
    if (t === prev[0] && c === prev[1] && p === prev[2] && u === prev[3]) return;
    this.own.set(node.id, [t, c, p, u]);
    for (const a of [node.id, ...this.ancestors(node.id)]) {
      const r = this.roll.get(a);
      if (r) {
        r.tokens += t - prev[0];
        r.cost += c - prev[1];
        r.priced += p - prev[2];
        r.unpriced = (r.unpriced ?? 0) + u - prev[3];
      }
    }
  }

  /** Parent, grandparent, … (known nodes only; stops on cycles). */
  ancestors(id: string): string[] {
    const out: string[] = [];
    const seen = new Set<string>([id]);
    let cur = this.nodes.get(id)?.parent_id;
    while (cur != null && this.nodes.has(cur) && !seen.has(cur)) {
      out.push(cur);
      seen.add(cur);
      cur = this.nodes.get(cur)!.parent_id;
    }
    return out;
  }

  private ensureStructure(): void {
    if (this.structureEpoch === this.epoch) return;
    this.kids.clear();
    this.waiting.clear();
    this.rootIds = [];
    for (const node of this.nodes.values()) {
      const parent = node.parent_id;
      if (parent != null && parent !== node.id && this.nodes.has(parent)) {
        let list = this.kids.get(parent);
        if (!list) this.kids.set(parent, (list = []));
        list.push(node.id);
      } else {
        this.rootIds.push(node.id);
        if (parent != null) this.waiting.add(parent);
      }
    }
    this.structureEpoch = this.epoch;
  }

  children(id: string): string[] {
    this.ensureStructure();
    return this.kids.get(id) ?? [];
  }

  roots(): string[] {
    this.ensureStructure();
    return this.rootIds;
  }

  /** Tokens and cost of each node including all descendants. Kept incrementally; rebuilt
   *  (iterative post-order) only after a structural change. */
  rollups(): Map<string, Rollup> {
    if (this.rollEpoch === this.epoch) return this.roll;
    this.ensureStructure();
    const out = new Map<string, Rollup>();
    this.own.clear();
    const stack: [string, boolean][] = this.rootIds.map((id) => [id, false]);
    while (stack.length) {
      const [id, visited] = stack.pop()!;
      if (!visited) {
        stack.push([id, true]);
        for (const c of this.kids.get(id) ?? []) stack.push([c, false]);
        continue;
      }
      const node = this.nodes.get(id)!;
      const own: Rollup = { tokens: tokensOf(node), cost: costOf(node), descendants: 0, priced: hasCost(node) ? 1 : 0, unpriced: unpricedOf(node) };
      this.own.set(id, [own.tokens, own.cost, own.priced, own.unpriced!]);
      for (const c of this.kids.get(id) ?? []) {
        const r = out.get(c);
        if (!r) continue;
        own.tokens += r.tokens;
        own.cost += r.cost;
        own.descendants += r.descendants + 1;
        own.priced += r.priced;
        own.unpriced! += r.unpriced ?? 0;
      }
      out.set(id, own);
    }
    this.roll = out;
    this.rollEpoch = this.epoch;
    return out;
  }
}

/**
 * The visible rows of one view, kept up to date incrementally: a new node is spliced in after
 * the last visible row of its parent's subtree (usually an append), so a live trace with many
 * thousands of nodes costs O(new nodes) per frame, not O(all nodes). Expand/collapse, a
 * search query or a structural change rebuild the list with `visibleRows`.
 */
export class RowModel {
  ids: string[] = [];
  depth = new Map<string, number>();
  matches: Set<string> | null = null;
  private read = 0;
  private epoch = -1;
  private key = "";
  private version = -1;

  constructor(private store: TraceStore) {}

  /** Bring the rows up to date; `layoutKey` changes whenever expansion state changes. */
  update(expanded: Map<string, boolean>, query: string, layoutKey: string): void {
    const store = this.store;
    const key = `${layoutKey}\u0000${query}`;
    if (query.trim()) {
      if (this.key !== key || this.version !== store.version) this.rebuild(expanded, query, key);
      return;
    }
    if (this.key !== key || this.epoch !== store.epoch) {
      this.rebuild(expanded, query, key);
      return;
    }
    const created = store.created;
    for (; this.read < created.length; this.read++) this.insert(created[this.read], expanded);
    this.version = store.version;
  }

  private rebuild(expanded: Map<string, boolean>, query: string, key: string): void {
    const rows = visibleRows(this.store, expanded, query);
    this.ids = rows.map((r) => r.id);
    this.depth = new Map(rows.map((r) => [r.id, r.depth]));
    this.matches = query.trim() ? new Set(rows.filter((r) => r.match).map((r) => r.id)) : null;
    this.read = this.store.created.length;
    this.epoch = this.store.epoch;
    this.version = this.store.version;
    this.key = key;
  }

  isOpen(id: string, expanded: Map<string, boolean>): boolean {
    if (this.matches) return true;
    return expanded.get(id) ?? (this.depth.get(id) ?? 0) < DEFAULT_OPEN_DEPTH;
  }

  private insert(id: string, expanded: Map<string, boolean>): void {
    const node = this.store.nodes.get(id);
    if (!node || this.depth.has(id)) return;
    const parent = node.parent_id != null && this.store.nodes.has(node.parent_id) ? node.parent_id : null;
    if (parent === null) {
      this.ids.push(id);
      this.depth.set(id, 0);
      return;
    }
    if (!this.depth.has(parent) || !this.isOpen(parent, expanded)) return; // hidden
    // the last visible row of the parent's subtree, not counting this node
    let cur = parent;
    while (this.isOpen(cur, expanded)) {
      const kids = this.store.children(cur);
      let last: string | null = null;
      for (let i = kids.length - 1; i >= 0; i--) {
        if (kids[i] !== id && this.depth.has(kids[i])) {
          last = kids[i];
          break;
        }
      }
      if (last === null) break;
      cur = last;
    }
    const at = this.ids[this.ids.length - 1] === cur ? this.ids.length - 1 : this.ids.lastIndexOf(cur);
    this.ids.splice(at + 1, 0, id);
    this.depth.set(id, this.depth.get(parent)! + 1);
  }
}

export function tokensOf(node: TraceNode): number {
  const u = node.usage;
  if (!u || typeof u !== "object") return 0;
  if (typeof u.total_tokens === "number") return u.total_tokens;
  return (typeof u.prompt_tokens === "number" ? u.prompt_tokens : 0) +
    (typeof u.completion_tokens === "number" ? u.completion_tokens : 0);
}

export function costOf(node: TraceNode): number {
  return typeof node.cost === "number" ? node.cost : 0;
}

/** 1 when the node used tokens but carries no cost (a call with no known price), else 0. */
export function unpricedOf(node: TraceNode): number {
  return tokensOf(node) && !hasCost(node) ? 1 : 0;
}

/** Whether the node itself carries a cost (a price was known), as opposed to no cost data. */
export function hasCost(node: TraceNode): boolean {
  return typeof node.cost === "number";
}

/** Trace times are seconds on the session's clock; a running node has no duration yet. */
export function durationMs(node: TraceNode): number | null {
  if (typeof node.start !== "number" || typeof node.end !== "number") return null;
  return Math.max(0, (node.end - node.start) * 1000);
}

/** The text a search matches against: name, kind, status, the row's hint (a log's message, a
 *  query's prompt, a tool call's arguments) and error. */
export function searchText(node: TraceNode): string {
  const err = node.error == null ? "" : typeof node.error === "string" ? node.error : JSON.stringify(node.error);
  return `${node.name ?? ""} ${node.kind ?? ""} ${node.status ?? ""} ${node.hint ?? ""} ${err}`.toLowerCase();
}

/** Default expansion when the user has not toggled a node: nodes at depth 0 and 1 are open. */
export const DEFAULT_OPEN_DEPTH = 2;

/**
 * The rows to show, in tree order. Without a query, a node's children are listed when it is
 * expanded (user choice, else the depth default). With a query, every match is listed and so
 * are all its ancestors (opened along the way), whatever their own expansion state.
 */
export function visibleRows(store: TraceStore, expanded: Map<string, boolean>, query = ""): Row[] {
  const q = query.trim().toLowerCase();
  const rows: Row[] = [];
  let keep: Set<string> | null = null;
  let matches: Set<string> | null = null;
  if (q) {
    keep = new Set();
    matches = new Set();
    for (const node of store.nodes.values()) {
      if (!searchText(node).includes(q)) continue;
      matches.add(node.id);
      let cur: TraceNode | undefined = node;
      const seen = new Set<string>();
      while (cur && !keep.has(cur.id) && !seen.has(cur.id)) {
        seen.add(cur.id);
        keep.add(cur.id);
        cur = cur.parent_id != null ? store.nodes.get(cur.parent_id) : undefined;
      }
    }
  }
  const stack: [string, number][] = [];
  const roots = store.roots();
  for (let i = roots.length - 1; i >= 0; i--) stack.push([roots[i], 0]);
  while (stack.length) {
    const [id, depth] = stack.pop()!;
    if (keep && !keep.has(id)) continue;
    const kids = store.children(id);
    const visibleKids = keep ? kids.filter((k) => keep!.has(k)) : kids;
    const open = keep ? visibleKids.length > 0 : expanded.get(id) ?? depth < DEFAULT_OPEN_DEPTH;
    rows.push({ id, depth, hasChildren: visibleKids.length > 0, expanded: open, match: matches ? matches.has(id) : false });
    if (open) for (let i = visibleKids.length - 1; i >= 0; i--) stack.push([visibleKids[i], depth + 1]);
  }
  return rows;
}

/** Which rows to put in the DOM for a scroll position: [start, end) with some overscan. */
export function windowRange(scrollTop: number, viewport: number, rowHeight: number, total: number, overscan = 8): [number, number] {
  const first = Math.floor(Math.max(0, scrollTop) / rowHeight);
  const count = Math.ceil(Math.max(0, viewport) / rowHeight);
  const start = Math.max(0, first - overscan);
  const end = Math.min(total, first + count + overscan);
  return [start, Math.max(start, end)];
}

/** Statuses a parent reports below itself ("1 denied, 2 cancelled below"). */
export const BAD = ["failed", "denied", "cancelled", "timed_out"];

/** Per node: failed / denied / cancelled / timed-out problems below it, each counted once
 *  where it started: a node that failed because a descendant failed is not counted again
 *  (langfx_nb/notebook/trace_rows.py problems_below). */
export function problemsBelow(store: TraceStore): Map<string, Record<string, number>> {
  const out = new Map<string, Record<string, number>>();
  const bad = [...store.nodes.values()].filter((n) => BAD.includes(String(n.status ?? "")));
  const aboveAProblem = new Set<string>();
  for (const node of bad) for (const a of store.ancestors(node.id)) aboveAProblem.add(a);
  for (const node of bad) {
    if (aboveAProblem.has(node.id)) continue; // failed because of what failed below it
    const status = String(node.status);
    for (const a of store.ancestors(node.id)) {
      const c = out.get(a) ?? {};
      c[status] = (c[status] ?? 0) + 1;
      out.set(a, c);
    }
  }
  return out;
}

export function belowText(c: Record<string, number> | undefined): string {
  if (!c) return "";
  return Object.entries(c).sort().map(([k, n]) => `${n} ${k.replace("_", " ")}`).join(", ") + " below";
}

/** What an edit changed: `a: 2 → 20` per key. */
export function argChanges(proposed: any, ran: any): string[] {
  const out: string[] = [];
  const p = proposed && typeof proposed === "object" ? proposed : {};
  const r = ran && typeof ran === "object" ? ran : {};
  for (const k of [...Object.keys(p), ...Object.keys(r).filter((k) => !(k in p))]) {
    const before = k in p ? JSON.stringify(p[k]) : "∅";
    const after = k in r ? JSON.stringify(r[k]) : "∅";
    if (before !== after) out.push(`${k}: ${before} → ${after}`);
  }
  return out;
}

export const WAITING_LABEL = "waiting for approval";
const LIVE = ["running", "waiting"];

/** Whether a recorded status is not terminal (work still running, or an approval awaited). */
export function isLive(status: unknown): boolean {
  return LIVE.includes(String(status ?? ""));
}

/**
 * The status a row shows. `ended`: the trace is over (a saved trace, a disposed session) —
 * work recorded as running never finished. `gone`: the kernel is gone — nothing shown can
 * still run. A session shows "open" while its kernel can run work under it, else "closed";
 * a log entry shows its level ("warning"), not a status (trace_rows.py status_label).
 */
export function statusLabel(node: TraceNode, ended = false, gone = false): string {
  const status = String(node.status ?? "");
  if (node.kind === "log") return String(node.name || "log"); // a log entry shows its level
  if (!isLive(status)) return status;
  if (node.kind === "session") return ended || gone ? "closed" : "open"; // a container
  if (ended || gone) return "unfinished";
  return status === "waiting" ? WAITING_LABEL : status;
}

/** Seconds a person (or an approval policy) took to decide this tool call, from the node's
 *  decision record; null when no policy was asked or it has not answered. */
export function humanWait(node: TraceNode): number | null {
  const d = node.decision as Record<string, unknown> | null | undefined;
  if (!d || typeof d !== "object") return null;
  if (typeof d.asked_at !== "number" || typeof d.decided_at !== "number") return null;
  return Math.max(0, d.decided_at - d.asked_at);
}

/** Cost of a subtree as a reader should see it (trace_rows.py cost_text, same text): "—"
 * when no node in it has a known price; "≥ $1.23 (3 calls unpriced)" when nodes in it used
 * tokens with no known price (the sum leaves them out). */
export function costText(r: Rollup | undefined): string {
  if (!r) return "";
  if (!r.priced) return r.tokens ? "—" : "";
  const text = fmtCost(r.cost) || "$0";
  const u = r.unpriced ?? 0;
  return u ? `≥ ${text} (${u.toLocaleString("en-US")} call${u === 1 ? "" : "s"} unpriced)` : text;
}

/** What the narrow cost column shows of `costText`: "≥ $1.23" for a partial sum (the
 * row's tooltip and the detail pane give the whole label). */
export function costShort(text: string): string {
  const cut = text.indexOf(" (");
  return cut < 0 ? text : text.slice(0, cut);
}

export function tokensText(n: number): string {
  return n ? `${n.toLocaleString("en-US")} tok` : "";
}

/** What one row shows (the static copy's rows hold the same values). */
export interface RowValues {
  id: string;
  depth: number;
  kind: string;
  name: string;
  hint: string;
  status: string;
  duration: string;
  tokens: string;
  cost: string;
  below: string;
  wait: string;
}

/** What one row shows, from the node, its subtree's roll-up and what went wrong below it. */
export function rowValuesOf(node: TraceNode, depth: number, r: Rollup | undefined, below: Record<string, number> | undefined, ended = false, gone = false): RowValues {
  const id = node.id;
  const wait = humanWait(node);
  return {
    id,
    depth,
    kind: String(node.kind ?? ""),
    name: String(node.name ?? ""),
    hint: String(node.hint ?? ""),
    status: statusLabel(node, ended, gone),
    duration: fmtDuration(durationMs(node)),
    tokens: r ? tokensText(r.tokens) : "",
    cost: costText(r),
    below: belowText(below),
    wait: wait === null ? "" : fmtDuration(wait * 1000),
  };
}

/** Every row in tree order with all rows expanded, as the live view draws them. */
export function traceRows(store: TraceStore, ended = false, gone = false): RowValues[] {
  const roll = store.rollups();
  const problems = problemsBelow(store);
  const all = { get: () => true } as unknown as Map<string, boolean>;
  return visibleRows(store, all).map((row) => rowValuesOf(store.nodes.get(row.id)!, row.depth, roll.get(row.id), problems.get(row.id), ended, gone));
}


/** One row of a windowed trace, as the kernel sends it (agentic/trace_reader.py rows). */
export interface WindowRow {
  node: TraceNode;
  depth: number;
  kids: boolean;
  open: boolean;
  match?: boolean;
  /** [subtree tokens, subtree cost, priced nodes, descendants, own tokens, unpriced nodes] */
  roll: number[];
  below?: Record<string, number>;
}

export interface WindowReply {
  req?: number;
  start: number;
  total: number;
  nodes: number;
  rows: WindowRow[];
  counts: { status: Record<string, number>; kind: Record<string, number> };
  matches?: number;
  selected_index?: number;
  /** A live trace: the kernel pushes this view's window again as events arrive. */
  live?: boolean;
  /** A push: the view it is for (the request it repeats is `req`). */
  view?: string;
  /** Live: roots still running (the session root runs until disposed). */
  roots_running?: number;
  span?: [number, number];
  ended?: boolean;
  summary?: Record<string, any> | null;
  /** The timeline overview's counts for the range the request named (`timeline`). */
  timeline?: Buckets;
}

/**
 * The rows a page holds of a trace too large to send whole: one window (what is on screen
 * plus a margin) of the visible list the kernel computed, with exact totals. `key` names the
 * view (expansion, filter) the window was computed for.
 */
export class RowWindow {
  reply: WindowReply = { start: 0, total: 0, nodes: 0, rows: [], counts: { status: {}, kind: {} } };
  key = "";
  /** The selected id the last reply's `selected_index` is for. */
  selected: string | null = null;
  private index = new Map<string, number>();

  set(reply: WindowReply, key: string, selected: string | null = null): void {
    this.reply = reply;
    this.key = key;
    this.selected = selected;
    this.index = new Map(reply.rows.map((r, k) => [String(r.node.id), reply.start + k]));
  }

  get total(): number {
    return this.reply.total;
  }

  at(i: number): WindowRow | undefined {
    return this.reply.rows[i - this.reply.start];
  }

  indexOf(id: string | null): number {
    if (id === null) return -1;
    const i = this.index.get(id);
    if (i !== undefined) return i;
    return id === this.selected && typeof this.reply.selected_index === "number" ? this.reply.selected_index : -1;
  }

  row(id: string): WindowRow | undefined {
    const i = this.index.get(id);
    return i === undefined ? undefined : this.at(i);
  }

  /** Whether rows [a, b) of the view `key` are held. */
  covers(a: number, b: number, key: string): boolean {
    const r = this.reply;
    return this.key === key && a >= r.start && Math.min(b, r.total) <= r.start + r.rows.length;
  }

  rollup(row: WindowRow): Rollup {
    const [tokens, cost, priced, descendants, own, unpriced] = row.roll;
    return { tokens, cost, priced, descendants, own, unpriced: unpriced ?? 0 };
  }
}
