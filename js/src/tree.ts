// Pure trace-row logic (no DOM): what each row shows (status label, sums, duration, human
// wait) and the window of rows the page holds. The kernel answers windows of rows
// (agentic/trace_reader.py WindowedTrace.window, stored or live) with their sums; nodes carry
// the core's field names (TraceNode.to_json). trace_parity.json holds the row values to what
// the static copy (langfx_nb/notebook/trace_rows.py row_values) computes.
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
  [key: string]: unknown;
}

/** Trace times are seconds on the session's clock; a running node has no duration yet. */
export function durationMs(node: TraceNode): number | null {
  if (typeof node.start !== "number" || typeof node.end !== "number") return null;
  return Math.max(0, (node.end - node.start) * 1000);
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

/** What an edit changed: `a: 2 → 20` per key. */
export function argChanges(proposed: any, ran: any): string[] {
  const p = proposed && typeof proposed === "object" ? proposed : {};
  const r = ran && typeof ran === "object" ? ran : {};
  const text = (o: any, k: string) => (k in o ? JSON.stringify(o[k]) : "∅");
  const keys = [...new Set([...Object.keys(p), ...Object.keys(r)])];
  return keys.filter((k) => text(p, k) !== text(r, k)).map((k) => `${k}: ${text(p, k)} → ${text(r, k)}`);
}

/** Whether a recorded status is not terminal (work still running, or an approval awaited). */
export const isLive = (status: unknown) => status === "running" || status === "waiting";

/** The status a row shows (trace_rows.py status_label, whose `ended` or `gone` is `over`: the
 *  trace is over or the kernel is gone, so work recorded as running never finished). */
export function statusLabel(node: TraceNode, over = false): string {
  const status = String(node.status ?? "");
  if (node.kind === "log") return String(node.name || "log"); // its level ("warning")
  if (!isLive(status)) return status;
  if (node.kind === "session") return over ? "closed" : "open"; // a container: open while its kernel can run work
  if (over) return "unfinished";
  return status === "waiting" ? "waiting for approval" : status;
}

/** Seconds a person (or a policy) took to decide this tool call (trace_rows.py human_wait). */
export function humanWait(node: TraceNode): number | null {
  const d = node.decision as Record<string, unknown> | null | undefined;
  if (typeof d?.asked_at !== "number" || typeof d.decided_at !== "number") return null;
  return Math.max(0, d.decided_at - d.asked_at);
}

/** A window row's sums over its subtree (the kernel computes them): `priced` nodes carry a
 *  known cost (0: the cost is unknown, not $0); `unpriced` nodes used tokens with no known
 *  cost (left out of `cost`: with `priced` too, the sum is partial); `own`: the node's tokens. */
export function rollupOf(row: { roll?: number[] }) {
  const [tokens = 0, cost = 0, priced = 0, descendants = 0, own = 0, unpriced = 0] = row.roll ?? [];
  return { tokens, cost, priced, descendants, own, unpriced };
}

/** Cost of a subtree as a reader should see it (trace_rows.py cost_text): "—" when no node in
 *  it has a known price; "≥ $1.23 (3 calls unpriced)" when its sum leaves some out. */
export function costText(r: { tokens: number; cost: number; priced: number; unpriced?: number }): string {
  if (!r.priced) return r.tokens ? "—" : "";
  const text = fmtCost(r.cost) || "$0";
  const u = r.unpriced ?? 0;
  return u ? `≥ ${text} (${u.toLocaleString("en-US")} call${u === 1 ? "" : "s"} unpriced)` : text;
}

/** What one row shows (trace_rows.py row_values), from the node, its subtree's sums and what
 *  went wrong below it ("1 cancelled, 2 timed out below"). */
export function rowValuesOf(row: Pick<WindowRow, "node"> & Partial<WindowRow>, over = false) {
  const { node } = row;
  const r = rollupOf(row);
  const wait = humanWait(node);
  const below = Object.entries(row.below ?? {}).sort().map(([k, n]) => `${n} ${k.replace("_", " ")}`).join(", ");
  return {
    id: node.id,
    depth: row.depth ?? 0,
    kind: String(node.kind ?? ""),
    name: String(node.name ?? ""),
    hint: String(node.hint ?? ""),
    status: statusLabel(node, over),
    duration: fmtDuration(durationMs(node)),
    tokens: r.tokens ? `${r.tokens.toLocaleString("en-US")} tok` : "",
    cost: costText(r),
    below: below && `${below} below`,
    wait: wait === null ? "" : fmtDuration(wait * 1000),
  };
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
  /** Live: roots still running (the session root runs until disposed). A live reply also
   *  carries the trace-wide values a state carries (span, summary, ended, offset), which the
   *  view reads as a state's (`adoptExtras`). */
  roots_running?: number;
  /** The timeline overview's counts for the range the request named (`timeline`). */
  timeline?: Buckets;
}

/** The rows a page holds of a trace: one window (what is on screen plus a margin) of the
 *  visible list the kernel computed, with exact totals; `key` names the view (expansion,
 *  filter, timeline range) it was computed for ("": the state's, for no view), `selected`
 *  the id its `selected_index` is for. */
export class RowWindow {
  private index: Map<string, number>;

  constructor(
    readonly reply: WindowReply = { start: 0, total: 0, nodes: 0, rows: [], counts: { status: {}, kind: {} } },
    readonly key = "",
    readonly selected: string | null = null,
  ) {
    this.index = new Map(reply.rows.map((r, k) => [String(r.node.id), reply.start + k]));
  }

  at(i: number): WindowRow | undefined {
    return this.reply.rows[i - this.reply.start];
  }

  indexOf(id: string | null): number {
    if (id === null) return -1;
    return this.index.get(id) ?? (id === this.selected ? this.reply.selected_index ?? -1 : -1);
  }

  /** Whether rows [a, b) of the view `key` are held. */
  covers(a: number, b: number, key: string): boolean {
    const r = this.reply;
    return this.key === key && a >= r.start && Math.min(b, r.total) <= r.start + r.rows.length;
  }
}
