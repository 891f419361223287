// The eval report's table logic, apart from the DOM (unit-tested in js/test): which rows a
// filter keeps, how a column sorts, what a score cell says.

export interface EvalRow {
  key: string;
  id: string;
  repeat?: number;
  status?: string;
  change?: string;
  inputs?: string;
  expected?: string;
  output?: string;
  output_a?: string;
  output_b?: string;
  scores?: Record<string, boolean | number | null>;
  a?: Record<string, number | null>;
  b?: Record<string, number | null>;
  meta?: Record<string, string>;
  node?: string | null;
  error?: string;
  errors?: Record<string, string>;
  traceback?: string; // where a failed trial's task raised (bounded, secrets masked)
  error_tracebacks?: Record<string, string>; // where each evaluator that raised did
  reasons?: Record<string, string>;
  tokens?: number;
  cost?: number;
  unpriced?: number; // model requests with no known price, left out of cost
  duration?: number;
  redo?: string; // why a stored trial of this case was not reused (re-scored / re-run)
}

export type Mode = "report" | "compare";

/** A comparison's order of changes: regressions first, unchanged cases last. */
export const CHANGE_ORDER: Record<string, number> = { regressed: 0, mixed: 1, improved: 2, removed: 3, added: 4, same: 5 };

/** A trial that did not pass every check: the task failed, an evaluator raised, or a
 *  pass/fail check failed. A numeric score is not a check (nothing says which value passes),
 *  so it never flags a row. In a comparison: a case whose scores changed. */
export function isFlagged(row: EvalRow, mode: Mode): boolean {
  if (mode === "compare") return row.change !== "same";
  if (row.status !== "ok" || row.error) return true;
  if (row.errors && Object.keys(row.errors).length) return true;
  return Object.values(row.scores ?? {}).some((v) => v === false || v === null);
}

/** The text a filter is matched against: id, status/change, inputs, outputs, errors,
 *  reasons and metadata values (lower case). */
export function searchText(row: EvalRow): string {
  const parts = [row.id, row.key, row.status, row.change, row.inputs, row.expected, row.output, row.output_a, row.output_b, row.error, row.redo];
  for (const v of Object.values(row.errors ?? {})) parts.push(v);
  for (const v of Object.values(row.reasons ?? {})) parts.push(v);
  for (const [k, v] of Object.entries(row.meta ?? {})) parts.push(`${k}=${v}`, v);
  return parts.filter((p) => p !== undefined && p !== null).join("\n").toLowerCase();
}

/** Rows matching every word of `query` (case-insensitive), and flagged ones only with
 *  `flaggedOnly`. `texts` caches each row's search text. */
export function filterRows(rows: EvalRow[], query: string, flaggedOnly: boolean, mode: Mode, texts: WeakMap<EvalRow, string>): EvalRow[] {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  return rows.filter((row) => {
    if (flaggedOnly && !isFlagged(row, mode)) return false;
    if (!words.length) return true;
    let text = texts.get(row);
    if (text === undefined) {
      text = searchText(row);
      texts.set(row, text);
    }
    return words.every((w) => text!.includes(w));
  });
}

/** The value a column sorts by: "id", "status", "change", "tokens", "cost", "duration",
 *  "score:NAME" (a report), "delta:NAME" (a comparison: b - a). Missing values sort last. */
export function sortValue(row: EvalRow, column: string): number | string | null {
  if (column.startsWith("score:")) {
    const v = row.scores?.[column.slice(6)];
    return v === null || v === undefined ? null : Number(v);
  }
  if (column.startsWith("delta:")) {
    const m = column.slice(6);
    const a = row.a?.[m];
    const b = row.b?.[m];
    return a === null || a === undefined || b === null || b === undefined ? null : b - a;
  }
  if (column === "change") return CHANGE_ORDER[row.change ?? ""] ?? 9;
  if (column === "tokens" || column === "cost" || column === "duration") return row[column] ?? null;
  if (column === "status") return row.status ?? "";
  return row.key;
}

const collator = new Intl.Collator(undefined, { numeric: true });

/** A sorted copy (stable; missing values last whatever the direction). */
export function sortRows(rows: EvalRow[], column: string, desc: boolean): EvalRow[] {
  const keyed = rows.map((row, i) => ({ row, i, v: sortValue(row, column) }));
  keyed.sort((x, y) => {
    if (x.v === null || y.v === null) return x.v === y.v ? x.i - y.i : x.v === null ? 1 : -1;
    const c = typeof x.v === "number" && typeof y.v === "number" ? x.v - y.v : collator.compare(String(x.v), String(y.v));
    return (desc ? -c : c) || x.i - y.i;
  });
  return keyed.map((k) => k.row);
}

/** A score as a cell shows it: pass / fail / a number / — (none: see the error). */
export function scoreText(v: boolean | number | null | undefined): string {
  if (v === true) return "pass";
  if (v === false) return "fail";
  if (v === null || v === undefined) return "—";
  return Number.isInteger(v) ? String(v) : v.toFixed(3);
}

export interface MetricJson {
  name: string;
  kind?: string;
  value: number | null;
  low: number | null;
  high: number | null;
  n: number;
  se?: number | null;
  trials?: number;
  errors?: number;
  missing?: number;
}

/** "82.0% [75.1%, 87.4%]" for a pass rate, "0.71 ± 0.03" for a mean. */
export function metricText(m: MetricJson | null | undefined): string {
  if (!m || m.value === null || m.value === undefined) return "—";
  const pct = (x: number | null) => (x === null ? "?" : `${(x * 100).toFixed(1)}%`);
  if (m.kind === "pass_rate") return `${pct(m.value)} [${pct(m.low)}, ${pct(m.high)}]`;
  if (m.se !== null && m.se !== undefined) return `${m.value.toPrecision(4)} ± ${m.se.toPrecision(2)}`;
  return m.value.toPrecision(4);
}

/** "n=10 · 2 errors · 1 task failed": what the value is over (a pass rate: every trial; a
 *  mean: "n=8 of 10", the scored ones) and the errors and failed tasks beside it (the
 *  report's `counts_text`). */
export function metricCounts(m: MetricJson): string {
  const trials = m.trials ?? m.n;
  const parts = [m.n === trials ? `n=${m.n}` : `n=${m.n} of ${trials}`];
  if (m.errors) parts.push(`${m.errors} error${m.errors === 1 ? "" : "s"}`);
  if (m.missing) parts.push(`${m.missing} task${m.missing === 1 ? "" : "s"} failed`);
  return parts.join(" · ");
}

/** While a run goes on (no final metrics yet): each metric over the rows so far, by the
 *  report's rule: a pass/fail metric is the passes over every row (an evaluator error or a
 *  failed task is not a pass), a numeric one the mean of the scored rows. No interval. */
export function runningMetrics(rows: EvalRow[]): { name: string; value: number; n: number; errors: number; missing: number }[] {
  const acc = new Map<string, { sum: number; n: number; errors: number; bool: boolean }>();
  let missing = 0;
  for (const row of rows) {
    if (row.status !== "ok") {
      missing++;
      continue;
    }
    for (const [name, v] of Object.entries(row.scores ?? {})) {
      let a = acc.get(name);
      if (!a) acc.set(name, (a = { sum: 0, n: 0, errors: 0, bool: true }));
      if (v === null) a.errors++;
      else {
        a.sum += Number(v);
        a.n++;
        a.bool = a.bool && typeof v === "boolean";
      }
    }
  }
  return [...acc.entries()].map(([name, a]) => {
    const n = a.bool ? a.n + a.errors + missing : a.n;
    return { name, value: n ? a.sum / n : NaN, n, errors: a.errors, missing };
  });
}
