// The trace explorer's timeline: its zoom (a time range of the trace), the axis math that
// places a row's bar on it, and the overview's bucket counts (computed here for a trace the
// page holds whole; the kernel answers them for a windowed one, with the same meaning).

/** Buckets of the overview strip. */
export const BUCKETS = 60;
/** Above this many nodes in the visible range, the strip shows counts, not bars. */
export const BAR_LIMIT = 300;
/** The narrowest zoom, as a share of the whole trace's span. */
const MIN_SHARE = 1e-6;

/** Null: the whole trace; else the visible time range [lo, hi] in trace seconds. */
export type Zoom = [number, number] | null;

/** The overview's groups of statuses (as langfx_nb/notebook/trace_timeline.py). */
export const GROUPS = ["running", "ok", "failed"] as const;
export type Group = (typeof GROUPS)[number];
const BAD = new Set(["failed", "denied", "cancelled", "timed_out"]);

export function groupOf(status: unknown): Group {
  const s = String(status ?? "ok");
  if (s === "running" || s === "waiting") return "running";
  return BAD.has(s) ? "failed" : "ok";
}

/** The visible range: the zoom kept inside the span (the whole span when not zoomed). */
export function visibleRange(span: [number, number], zoom: Zoom): [number, number] {
  const [a, b] = span;
  if (!zoom) return [a, b];
  const width = Math.min(b - a, Math.max(zoom[1] - zoom[0], (b - a) * MIN_SHARE));
  const lo = Math.min(Math.max(zoom[0], a), b - width);
  return [lo, lo + width];
}

/** Zoom by `factor` (< 1 in, > 1 out) around the point at `at` (0–1) of the visible range.
 *  Null when the result covers the whole span. */
export function zoomBy(span: [number, number], zoom: Zoom, factor: number, at = 0.5): Zoom {
  const [lo, hi] = visibleRange(span, zoom);
  const width = (hi - lo) * factor;
  if (width >= span[1] - span[0]) return null;
  const centre = lo + (hi - lo) * Math.min(1, Math.max(0, at));
  return visibleRange(span, [centre - width * at, centre - width * at + width]);
}

/** Move the visible range by `share` of its width (negative: earlier). */
export function panBy(span: [number, number], zoom: Zoom, share: number): Zoom {
  if (!zoom) return null;
  const [lo, hi] = visibleRange(span, zoom);
  const d = (hi - lo) * share;
  return visibleRange(span, [lo + d, hi + d]);
}

/** A bar's left and width, in % of the axis [lo, hi], clipped to it (null: outside). */
export function barPlace(start: number, end: number, lo: number, hi: number): [number, number] | null {
  const total = hi - lo;
  if (!(total > 0) || end < lo || start > hi) return null;
  const a = Math.max(start, lo);
  const b = Math.min(Math.max(end, start), hi);
  return [((a - lo) / total) * 100, ((b - a) / total) * 100];
}

/** Counts per bucket of [lo, hi] (the overview; see trace_timeline.bucket_counts). */
export interface Buckets {
  lo: number;
  hi: number;
  buckets: number;
  in_range: number;
  before: number;
  after: number;
  untimed: number;
  counts: Record<Group, number[]>;
}

/** Nodes by the bucket their start falls in (the last bucket includes `hi`), by group. */
export function bucketCounts(nodes: Iterable<{ start?: unknown; status?: unknown }>, lo: number, hi: number, buckets = BUCKETS): Buckets {
  const counts = { running: new Array(buckets).fill(0), ok: new Array(buckets).fill(0), failed: new Array(buckets).fill(0) } as Record<Group, number[]>;
  const out: Buckets = { lo, hi, buckets, in_range: 0, before: 0, after: 0, untimed: 0, counts };
  const width = (hi - lo) / buckets;
  for (const n of nodes) {
    const s = n.start;
    if (typeof s !== "number" || Number.isNaN(s)) out.untimed++;
    else if (s < lo) out.before++;
    else if (s > hi) out.after++;
    else {
      let b = width > 0 ? Math.min(buckets - 1, Math.floor((s - lo) / width)) : 0;
      // as the kernel's bisection: a start on an edge lo + k·width opens bucket k
      while (b + 1 < buckets && s >= lo + (b + 1) * width) b++;
      while (b > 0 && s < lo + b * width) b--;
      if (width <= 0) b = buckets - 1;
      counts[groupOf(n.status)][b]++;
      out.in_range++;
    }
  }
  return out;
}
