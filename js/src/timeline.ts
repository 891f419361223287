// The trace explorer's timeline: its zoom (a time range of the trace) and the axis math that
// places a row's bar on it. The overview's bucket counts come from the kernel with each window
// (agentic/trace_reader.py time_buckets).

/** Buckets of the overview strip. */
export const BUCKETS = 60;
/** Above this many nodes in the visible range, the strip shows counts, not bars. */
export const BAR_LIMIT = 300;
/** The narrowest zoom, as a share of the whole trace's span. */
const MIN_SHARE = 1e-6;

/** Null: the whole trace; else the visible time range [lo, hi] in trace seconds. */
export type Zoom = [number, number] | null;

/** The overview's groups of statuses (as agentic/trace_reader.py GROUPS). */
export const GROUPS = ["running", "ok", "failed"] as const;

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

/** A bar's left and width, in % of the axis [lo, hi], clipped to it (null: outside). */
export function barPlace(start: number, end: number, lo: number, hi: number): [number, number] | null {
  const total = hi - lo;
  if (!(total > 0) || end < lo || start > hi) return null;
  const a = Math.max(start, lo);
  const b = Math.min(Math.max(end, start), hi);
  return [((a - lo) / total) * 100, ((b - a) / total) * 100];
}

/** Counts per bucket of [lo, hi] (the overview, as the kernel counts them). */
export interface Buckets {
  lo: number;
  hi: number;
  buckets: number;
  in_range: number;
  before: number;
  after: number;
  untimed: number;
  counts: Record<(typeof GROUPS)[number], number[]>;
}
