// The batch progress view's state and the rules that fold the kernel's patches into it (the
// same rules as langfx_nb/notebook/batch_view.py BatchReducer; js/test/batch.test.ts replays
// the kernel's recorded patches and compares the result with the kernel's snapshot).
// The progress fields are BatchProgress.to_json() (langfx_nb/batch/progress.py).
import { costLabel } from "./dom";

export interface ErrorGroup {
  type: string; // the exception class
  count: number; // exact
  first_message: string; // untrusted text, shown as text only
  items: number[]; // the first items' input indices
  node_ids: (string | null)[]; // their item trace nodes
}

/** Requests by outcome, as a provider counts them (all of them, or one batch's). */
export interface OutcomeCounts {
  total?: number;
  succeeded?: number;
  errored?: number;
  expired?: number;
  canceled?: number;
  processing?: number;
}

/** The provider's own counts (engine=ProviderBatch()): BatchProgress.provider. */
export interface ProviderCounts extends OutcomeCounts {
  status?: string; // collecting | submitting | waiting | collected
  batches?: number;
  resumed_batches?: number; // of batches, found in the run manifest (an earlier process's)
  resubmitted?: number;
  per_batch?: ProviderBatchCounts[];
}

/** One submitted batch's last poll. */
export interface ProviderBatchCounts extends OutcomeCounts {
  id?: string;
  provider?: string;
  status?: string; // the provider's own status word
}

export interface BatchState {
  title: string;
  status: string; // running | done | some failed | failed | stopped (finished with items not run)
  note?: string; // a stopped batch: what finished and whether its results are kept (kernel text)
  name: string;
  total: number;
  done: number; // items with a result (resumed ones included)
  failed: number;
  running: number;
  left: number;
  resumed: number;
  elapsed_s: number;
  items_per_s: number;
  tokens_per_s: number;
  eta_s: number | null; // null = unknown
  requests: number;
  usage: Record<string, number>; // a count that is absent is unknown
  cost: number | null; // null = unknown (no price known), never shown as $0
  unpriced_models: string[];
  unpriced_requests: number; // requests left out of cost (no price known)
  errors: ErrorGroup[];
  finished: boolean;
  batch_node_id: string | null;
  session_id: string | null;
  provider: ProviderCounts | null; // null: not a provider batch
  opened: string | null; // the error class whose traces are shown below
  open_error: string; // why a group's traces could not be opened
}

export type BatchPatch =
  | { op: "progress"; progress: Partial<BatchState> }
  | { op: "open"; type: string | null; open_error?: string };

export function emptyBatch(): BatchState {
  return {
    title: "", status: "running", name: "batch", total: 0, done: 0, failed: 0, running: 0, left: 0,
    resumed: 0, elapsed_s: 0, items_per_s: 0, tokens_per_s: 0, eta_s: null, requests: 0, usage: {},
    cost: null, unpriced_models: [], unpriced_requests: 0, errors: [], finished: false, batch_node_id: null,
    session_id: null, provider: null, opened: null, open_error: "",
  };
}

/** What the view keeps for itself (a progress patch never changes it). */
const OWN = new Set(["opened", "open_error", "title"]);

export function applyBatchPatch(state: BatchState, patch: BatchPatch): void {
  if (patch.op === "progress") {
    const p = patch.progress as Record<string, unknown>;
    for (const [key, value] of Object.entries(p)) if (!OWN.has(key)) (state as any)[key] = value;
  } else if (patch.op === "open") {
    state.opened = patch.type;
    state.open_error = patch.open_error ?? "";
  }
}

export function fmtCount(n: number | null | undefined): string {
  return typeof n === "number" ? n.toLocaleString("en-US") : "?";
}

/** The label of an error group's button: how many of its items' traces it opens, and of
 *  how many, when the view keeps only the first items of a group ("open 20 of 38 traces"). */
export function openTracesLabel(g: ErrorGroup): string {
  const known = g.node_ids.filter((n) => n).length;
  return known >= g.count ? `open traces (${fmtCount(known)})` : `open ${fmtCount(known)} of ${fmtCount(g.count)} traces`;
}

export function fmtRate(r: number | null | undefined, unit: string): string {
  if (typeof r !== "number" || !Number.isFinite(r)) return `— ${unit}/s`;
  const digits = r >= 100 ? 0 : r >= 10 ? 1 : 2;
  return `${r.toFixed(digits)} ${unit}/s`;
}

/** Seconds as "42 s", "3m05s", "1h02m"; "unknown" when there is no estimate. */
export function fmtSeconds(s: number | null | undefined): string {
  if (typeof s !== "number" || !Number.isFinite(s) || s < 0) return "unknown";
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.round(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(Math.floor(s % 60)).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** Token usage: the total, and prompt/completion when known; absent counts are unknown. */
export function fmtTokens(usage: Record<string, number> | null | undefined): string {
  const u = usage ?? {};
  const inp = u.prompt_tokens;
  const out = u.completion_tokens;
  const total = typeof u.total_tokens === "number" ? u.total_tokens : typeof inp === "number" && typeof out === "number" ? inp + out : null;
  if (total === null) return "tokens unknown";
  const split = typeof inp === "number" && typeof out === "number" ? ` (${fmtCount(inp)} in · ${fmtCount(out)} out)` : "";
  return `${fmtCount(total)} tokens${split}`;
}

/** The bar's shares: items done and failed, of the total (an empty batch is complete). */
export function fraction(state: BatchState): { done: number; failed: number } {
  if (!state.total) return { done: state.finished ? 1 : 0, failed: 0 };
  return { done: Math.min(1, state.done / state.total), failed: Math.min(1, state.failed / state.total) };
}

function providerCounts(c: ProviderBatchCounts): string {
  const n = (v: unknown) => (typeof v === "number" ? v : 0);
  let text = `${fmtCount(n(c.succeeded))} / ${fmtCount(n(c.total))} completed, ${fmtCount(n(c.errored))} failed`;
  for (const key of ["expired", "canceled"] as const) if (n(c[key])) text += `, ${fmtCount(n(c[key]))} ${key}`;
  return text;
}

/** The provider's counts in words (langfx_nb/batch/progress.py provider_lines, same text):
 * the run's first, then one line per submitted batch. */
export function fmtProvider(p: ProviderCounts | null | undefined): string[] {
  if (!p || typeof p !== "object") return [];
  const count = typeof p.batches === "number" ? p.batches : 0;
  let head = `provider ${p.status ?? ""}: ${providerCounts(p)} in ${fmtCount(count)} batch${count === 1 ? "" : "es"}`;
  if (typeof p.resumed_batches === "number" && p.resumed_batches) {
    head += ` (${fmtCount(p.resumed_batches)} resumed from the run manifest)`;
  }
  if (typeof p.resubmitted === "number" && p.resubmitted) head += ` (${fmtCount(p.resubmitted)} resubmitted)`;
  const lines = [head];
  for (const b of p.per_batch ?? []) {
    if (b && typeof b === "object") lines.push(`${b.provider ?? ""} ${b.id ?? ""}: ${providerCounts(b)} (${b.status ?? ""})`);
  }
  return lines;
}
