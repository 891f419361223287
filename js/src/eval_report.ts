// EvalReportView: an evaluation report (or a comparison) — metric summary, breakdown by
// metadata, and a sortable, filterable table that draws only the rows on screen. A click on
// a row asks the kernel to open that trial's trace in the explorer below (a child widget drawn
// inside this view, so the report is one output in every host).
// Model text (outputs, reasons, errors) only reaches the page as textContent.
import { KINDS } from "./kinds";
import { clear, costLabel, decodeState, fmtCost, fmtMoney, fmtDuration, h, injectCss, markLive, onKernelGone, trySend } from "./dom";
import { windowRange } from "./tree";
import { Host, renderChild } from "./child";
import { CHANGE_ORDER, EvalRow, MetricJson, Mode, filterRows, isFlagged, metricCounts, metricText, runningMetrics, scoreText, sortRows } from "./eval_table";

interface Model {
  get(name: string): any;
  set(name: string, value: unknown): void;
  save_changes(): void;
  on(event: string, cb: (...args: any[]) => void): void;
  send(content: unknown): void;
}

/** Benchmarks set `globalThis.__lfxTimings = []` to get where the page's time goes. */
function took(label: string, ms: number): void {
  const t = (globalThis as any).__lfxTimings;
  if (Array.isArray(t)) t.push([label, Math.round(ms * 10) / 10]);
}

const ROW_H = 22;
const BODY_H = 352;

const CSS = `
.lfx-er{border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:4px;padding:6px 8px;background:var(--jp-layout-color0,#fff)}
.lfx-er-head{display:flex;align-items:baseline;gap:10px;flex-wrap:wrap;margin-bottom:4px}
.lfx-er-metrics{display:flex;flex-wrap:wrap;gap:6px;margin:4px 0}
.lfx-er-metric{border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:4px;padding:2px 8px;background:var(--jp-layout-color1,#fff)}
.lfx-er-metric b{margin-right:6px}
.lfx-er-metric.lfx-er-beyond{border-color:var(--lfx-warn)}
.lfx-er-bar{display:flex;align-items:center;gap:8px;margin:6px 0 2px}
.lfx-er-bar input[type=search]{font:inherit;flex:0 1 260px;padding:1px 6px;border:1px solid var(--jp-border-color1,#bdbdbd);border-radius:3px;background:var(--jp-layout-color0,#fff);color:var(--jp-ui-font-color1,#222)}
.lfx-er-grid{display:grid;align-items:center;column-gap:8px;padding:0 6px;height:${ROW_H}px;box-sizing:border-box;white-space:nowrap}
.lfx-er-grid>span{overflow:hidden;text-overflow:ellipsis}
.lfx-er-th{font-weight:600;border-bottom:1px solid var(--jp-border-color1,#bdbdbd);cursor:default;user-select:none}
.lfx-er-th>span{cursor:pointer}
.lfx-er-th>span.lfx-er-sorted::after{content:" ▾"}
.lfx-er-th>span.lfx-er-sorted.lfx-er-asc::after{content:" ▴"}
.lfx-er-body{position:relative;overflow-y:auto;height:${BODY_H}px;border-bottom:1px solid var(--jp-border-color2,#e0e0e0)}
.lfx-er-row{position:absolute;left:0;right:0;cursor:pointer;border-bottom:1px solid color-mix(in srgb,var(--jp-border-color2,#e0e0e0) 60%,transparent)}
.lfx-er-row:hover{background:var(--jp-layout-color2,#eee)}
.lfx-er-row.lfx-sel{background:var(--jp-layout-color3,#ddd);color:var(--jp-ui-font-color0,#000)}
.lfx-er-row.lfx-er-regressed,.lfx-er-row.lfx-er-mixed{background:color-mix(in srgb,var(--lfx-bad) 14%,transparent)}
.lfx-er-row.lfx-er-improved{background:color-mix(in srgb,var(--lfx-ok) 14%,transparent)}
.lfx-er-row.lfx-er-added,.lfx-er-row.lfx-er-removed{background:color-mix(in srgb,var(--lfx-warn) 12%,transparent)}
.lfx-er-row.lfx-sel.lfx-er-regressed,.lfx-er-row.lfx-sel.lfx-er-improved{outline:2px solid var(--jp-brand-color1,#2196f3);outline-offset:-2px}
.lfx-er-fail{color:color-mix(in srgb,var(--lfx-bad) 75%,var(--lfx-fg0))}
.lfx-er-pass{color:color-mix(in srgb,var(--lfx-ok) 75%,var(--lfx-fg0))}
.lfx-er-detail{margin-top:4px;display:grid;grid-template-columns:max-content 1fr;column-gap:8px;row-gap:2px}
.lfx-er-detail>pre{margin:0}
.lfx-er-breakdown table{border-collapse:collapse;margin:2px 0}
.lfx-er-breakdown td,.lfx-er-breakdown th{padding:1px 8px;text-align:left;border-bottom:1px solid var(--jp-border-color2,#e0e0e0)}
.lfx-er-note{min-height:16px}
.lfx-er-traces{margin-top:6px}
`;

interface Column {
  id: string;
  label: string;
  width: string;
  cell(row: EvalRow): { text: string; cls?: string; title?: string };
}

/** A pass/fail check is coloured; a number is not (nothing says which value passes). */
function scoreCls(v: unknown): string {
  return v === false ? "lfx-er-fail" : v === true ? "lfx-er-pass" : "";
}

/** " (2 errors · 1 task failed)" after a run's value in a comparison: what it counted as not
 *  passed (or left out of a mean); "" when nothing. */
function troubles(m: MetricJson | null | undefined): string {
  if (!m || (!m.errors && !m.missing)) return "";
  return ` (${metricCounts(m).split(" · ").slice(1).join(" · ")})`;
}

function columnsFor(mode: Mode, metrics: string[]): Column[] {
  const cols: Column[] = [{ id: "id", label: mode === "compare" ? "case" : "trial", width: "minmax(70px,1fr)", cell: (r) => ({ text: r.key }) }];
  if (mode === "compare") {
    cols.push({ id: "change", label: "change", width: "90px", cell: (r) => ({ text: r.change ?? "" }) });
    for (const m of metrics) {
      cols.push({
        id: `delta:${m}`, label: m, width: "minmax(90px,1fr)",
        cell: (r) => {
          const a = r.a?.[m], b = r.b?.[m];
          return { text: `${scoreText(a)} → ${scoreText(b)}`, cls: a !== undefined && b !== undefined && a !== null && b !== null ? (b < a ? "lfx-er-fail" : b > a ? "lfx-er-pass" : "") : "" };
        },
      });
    }
    cols.push({ id: "output", label: "output (b)", width: "minmax(120px,3fr)", cell: (r) => ({ text: r.output_b ?? "", title: `a: ${r.output_a ?? ""}\nb: ${r.output_b ?? ""}` }) });
    return cols;
  }
  cols.push({ id: "status", label: "status", width: "64px", cell: (r) => ({ text: `${r.status ?? ""}${r.redo ? " ↻" : ""}`, cls: r.status === "ok" ? "" : "lfx-er-fail", title: r.redo }) });
  for (const m of metrics) {
    cols.push({
      id: `score:${m}`, label: m, width: "minmax(56px,1fr)",
      cell: (r) => {
        const v = r.scores?.[m];
        const err = r.errors?.[m];
        return { text: err ? "error" : scoreText(v), cls: err ? "lfx-er-fail" : scoreCls(v), title: err ?? r.reasons?.[m] };
      },
    });
  }
  cols.push({ id: "output", label: "output", width: "minmax(120px,3fr)", cell: (r) => ({ text: r.error ?? r.output ?? "", cls: r.error ? "lfx-er-fail" : "", title: r.error ?? r.output }) });
  cols.push({ id: "tokens", label: "tokens", width: "56px", cell: (r) => ({ text: r.tokens === undefined ? "" : String(r.tokens) }) });
  cols.push({ id: "cost", label: "cost", width: "60px", cell: (r) => {
    if (!r.unpriced) return { text: r.cost === undefined ? "" : fmtCost(r.cost) };
    const label = costLabel(r.cost ?? null, r.unpriced);
    return { text: r.cost === undefined ? "—" : `≥ ${fmtMoney(r.cost)}`, title: label };
  } });
  cols.push({ id: "duration", label: "time", width: "60px", cell: (r) => ({ text: r.duration === undefined ? "" : fmtDuration(r.duration * 1000) }) });
  return cols;
}

export default () => {
  const shared = {
    mode: "report" as Mode,
    rows: new Map<string, EvalRow>(),
    summary: {} as any,
    finished: false,
    seq: 0,
    listeners: new Set<() => void>(),
  };

  function applyState(state: any): void {
    if (!state || !Array.isArray(state.rows)) return;
    shared.mode = state.mode === "compare" ? "compare" : "report";
    shared.rows = new Map((state.rows as EvalRow[]).map((r) => [r.key, r]));
    shared.summary = state.summary ?? {};
    shared.finished = !!state.finished;
    if (typeof state.seq === "number") shared.seq = state.seq;
  }
  const changed = () => { for (const l of shared.listeners) l(); };

  return {
    initialize({ model }: { model: Model }) {
      took("@eval:initialize", Date.now());
      const t0 = performance.now();
      applyState(decodeState(model.get("state")));
      took("eval:initialize", performance.now() - t0);
      model.on("change:state", () => {
        took("@eval:state", Date.now());
        const t0 = performance.now();
        const state = decodeState(model.get("state"));
        took("eval:decode", performance.now() - t0);
        if (state && (state.finished || typeof state.seq !== "number" || state.seq >= shared.seq)) {
          applyState(state);
          changed();
        }
      });
      model.on("msg:custom", (msg: any, buffers?: any[]) => {
        if (msg?.kind === KINDS.EVENTS) {
          if (typeof msg.seq === "number" && msg.seq <= shared.seq) return;
          for (const e of msg.events ?? []) if (e?.op === "row" && e.row?.key) shared.rows.set(e.row.key, e.row);
          if (typeof msg.seq === "number") shared.seq = msg.seq;
          changed();
        } else if (msg?.kind === KINDS.SNAPSHOT) {
          const state = buffers && buffers.length ? decodeState(buffers[0]) : msg.state;
          if (state) {
            applyState({ ...state, seq: msg.seq });
            changed();
          }
        }
      });
    },
    render({ model, el, host }: { model: Model; el: HTMLElement; host?: Host }) {
      const saved = model.get("view_state") ?? {};
      const view = {
        sort: typeof saved.sort === "string" ? saved.sort : shared.mode === "compare" ? "change" : "id",
        desc: !!saved.desc,
        query: typeof saved.query === "string" ? saved.query : "",
        flagged: !!saved.flagged,
        selected: null as string | null,
      };
      took("@eval:render", Date.now());
      const root = h("div", { class: "lfx lfx-er" });
      injectCss(root, CSS);
      const head = h("div", { class: "lfx-er-head" });
      const metricsEl = h("div", { class: "lfx-er-metrics" });
      const breakdown = h("details", { class: "lfx-er-breakdown" });
      const filter = h("input", { type: "search", placeholder: "filter: id, output, error, tag…", "aria-label": "filter cases" }) as HTMLInputElement;
      filter.value = view.query;
      const flagged = h("input", { type: "checkbox" }) as HTMLInputElement;
      flagged.checked = view.flagged;
      const flaggedLabel = h("label", {}, flagged, h("span", { class: "lfx-er-flag-label" }));
      const count = h("span", { class: "lfx-muted lfx-er-count" });
      const bar = h("div", { class: "lfx-er-bar" }, filter, flaggedLabel, count);
      const thead = h("div", { class: "lfx-er-grid lfx-er-th", role: "row" });
      const body = h("div", { class: "lfx-er-body", role: "grid", tabindex: "0" });
      const spacer = h("div", { style: "position:relative" });
      body.append(spacer);
      const note = h("div", { class: "lfx-muted lfx-er-note" });
      const detail = h("div", { class: "lfx-er-detail" });
      const traces = h("div", { class: "lfx-er-traces" });
      root.append(head, metricsEl, breakdown, bar, thead, body, note, detail, traces);
      el.append(root);
      markLive(el);

      const texts = new WeakMap<EvalRow, string>();
      let shown: EvalRow[] = [];
      let cols: Column[] = [];
      let template = "";
      let frame = 0;
      let layoutKey = "";
      let drawn = new Map<string, HTMLElement>();

      function metricNames(): string[] {
        const fromSummary = ((shared.summary.metrics ?? []) as MetricJson[]).map((m) => m.name);
        if (fromSummary.length) return fromSummary;
        const names = new Set<string>();
        for (const r of shared.rows.values()) for (const k of Object.keys(shared.mode === "compare" ? r.b ?? {} : r.scores ?? {})) names.add(k);
        return [...names];
      }

      function saveView(): void {
        model.set("view_state", { sort: view.sort, desc: view.desc, query: view.query, flagged: view.flagged });
        model.save_changes();
      }

      function drawHead(): void {
        clear(head);
        const s = shared.summary;
        head.append(h("b", { text: model.get("title") || s.title || (shared.mode === "compare" ? "Comparison" : "Evaluation") }));
        if (shared.mode === "compare") {
          const counts = s.counts ?? {};
          const text = Object.keys(counts).sort((a, b) => (CHANGE_ORDER[a] ?? 9) - (CHANGE_ORDER[b] ?? 9)).map((k) => `${counts[k]} ${k}`).join(" · ");
          head.append(h("span", { class: "lfx-muted", text }));
        } else {
          const failed = [...shared.rows.values()].filter((r) => r.status !== "ok").length;
          const partial = !shared.finished || !!s.stopped;
          const parts = [partial && typeof s.expected === "number" ? `${shared.rows.size} of ${s.expected} trials` : `${shared.rows.size} trials`];
          if (s.cases !== undefined) parts.push(`${s.cases} cases × ${s.repeats}`);
          parts.push(`${failed} failed`);
          for (const [kind, n] of Object.entries((s.redone ?? {}) as Record<string, number>)) parts.push(`${n} ${kind}`);
          if (s.tokens) parts.push(`${s.tokens} tokens`);
          if (typeof s.cost === "number" || s.unpriced) parts.push(costLabel(s.cost, s.unpriced ?? 0));
          if (typeof s.elapsed_s === "number") parts.push(fmtDuration(s.elapsed_s * 1000));
          if (!shared.finished) parts.push("running…");
          else if (s.stopped) parts.push(`stopped (${s.stopped})`);
          head.append(h("span", { class: "lfx-muted", text: parts.join(" · ") }));
        }
        clear(metricsEl);
        const metrics = (s.metrics ?? []) as any[];
        if (shared.mode === "compare") {
          for (const m of metrics) {
            const delta = m.delta === null || m.delta === undefined ? "—" : `${m.delta >= 0 ? "+" : ""}${m.delta.toPrecision(3)}`;
            const interval = m.low === null || m.high === null ? "" : ` [${m.low.toPrecision(3)}, ${m.high.toPrecision(3)}]`;
            metricsEl.append(h("span", { class: `lfx-er-metric${m.beyond_noise ? " lfx-er-beyond" : ""}`, title: s.test ?? "" },
              h("b", { text: m.name }), `${metricText(m.a)}${troubles(m.a)} → ${metricText(m.b)}${troubles(m.b)} · Δ ${delta}${interval} ${m.beyond_noise ? "beyond noise" : "within noise"}`));
          }
        } else if (metrics.length) {
          for (const m of metrics as MetricJson[]) {
            metricsEl.append(h("span", { class: "lfx-er-metric", title: m.kind === "pass_rate" ? "pass rate [95% Wilson interval]" : "mean ± standard error" },
              h("b", { text: m.name }), `${metricText(m)} ${metricCounts(m)}`));
          }
        } else {
          for (const m of runningMetrics([...shared.rows.values()])) {
            metricsEl.append(h("span", { class: "lfx-er-metric" }, h("b", { text: m.name }),
              `${Number.isNaN(m.value) ? "—" : m.value.toPrecision(3)} so far, ${metricCounts({ ...m, low: null, high: null })}`));
          }
        }
        drawBreakdown();
      }

      function drawBreakdown(): void {
        clear(breakdown);
        const groups = shared.summary.breakdown ?? {};
        const keys = Object.keys(groups);
        breakdown.style.display = keys.length ? "" : "none";
        if (!keys.length) return;
        breakdown.append(h("summary", { text: `breakdown by ${keys.join(", ")}` }));
        for (const key of keys) {
          const table = h("table");
          const values = Object.keys(groups[key]);
          const names = (groups[key][values[0]] ?? []).map((m: MetricJson) => m.name);
          table.append(h("tr", {}, h("th", { text: key }), ...names.map((n: string) => h("th", { text: n }))));
          for (const v of values) table.append(h("tr", {}, h("td", { text: v }), ...(groups[key][v] as MetricJson[]).map((m) => h("td", { text: `${metricText(m)} ${metricCounts(m)}` }))));
          breakdown.append(table);
        }
      }

      function recompute(): void {
        const names = metricNames();
        const key = `${shared.mode}|${names.join("\u0000")}`;
        if (key !== layoutKey) {
          layoutKey = key;
          cols = columnsFor(shared.mode, names);
          template = cols.map((c) => c.width).join(" ");
          thead.style.gridTemplateColumns = template;
          clear(thead);
          for (const c of cols) {
            const label = h("span", { text: c.label, title: `sort by ${c.label}`, "data-col": c.id });
            label.addEventListener("click", () => {
              if (view.sort === c.id) view.desc = !view.desc;
              else { view.sort = c.id; view.desc = c.id.startsWith("score:") || c.id === "tokens" || c.id === "cost" || c.id === "duration"; }
              saveView();
              update();
            });
            thead.append(label);
          }
          for (const el of drawn.values()) el.remove();
          drawn = new Map();
        }
        for (const label of Array.from(thead.children)) {
          const on = (label as HTMLElement).dataset.col === view.sort;
          label.classList.toggle("lfx-er-sorted", on);
          label.classList.toggle("lfx-er-asc", on && !view.desc);
        }
        (flaggedLabel.lastChild as HTMLElement).textContent = shared.mode === "compare" ? " changed only" : " failing only";
        const all = [...shared.rows.values()];
        shown = sortRows(filterRows(all, view.query, view.flagged, shared.mode, texts), view.sort, view.desc);
        count.textContent = shown.length === all.length ? `${all.length} rows` : `${shown.length} of ${all.length} rows`;
        spacer.style.height = `${shown.length * ROW_H}px`;
        for (const el of drawn.values()) el.remove();
        drawn = new Map();
      }

      function drawRows(): void {
        const [start, end] = windowRange(body.scrollTop, body.clientHeight || BODY_H, ROW_H, shown.length);
        const keep = new Map<string, HTMLElement>();
        for (let i = start; i < end; i++) {
          const row = shown[i];
          const id = `${i}|${row.key}`;
          let div = drawn.get(id);
          if (div) div.classList.toggle("lfx-sel", view.selected === row.key);
          else {
            div = h("div", { class: `lfx-er-grid lfx-er-row${row.change ? ` lfx-er-${row.change}` : ""}${view.selected === row.key ? " lfx-sel" : ""}`, role: "row", "data-key": row.key });
            div.style.gridTemplateColumns = template;
            div.style.top = `${i * ROW_H}px`;
            for (const c of cols) {
              const v = c.cell(row);
              div.append(h("span", { class: v.cls ?? "", text: v.text, title: v.title }));
            }
            div.addEventListener("click", () => select(row));
            spacer.append(div);
          }
          keep.set(id, div);
        }
        for (const [id, div] of drawn) if (!keep.has(id)) div.remove();
        drawn = keep;
      }

      function select(row: EvalRow): void {
        // ask for the trace first: the kernel answers while this page draws the selection
        const asked = row.node ? trySend(model, { kind: KINDS.OPEN_TRACE, id: row.node, key: row.key }) : false;
        view.selected = row.key;
        drawRows(); // the rows on screen stay; only the selection moves
        clear(detail);
        const fields: [string, string | undefined][] = [["case", row.id], ["inputs", row.inputs], ["expected", row.expected], ["not reused", row.redo]];
        if (shared.mode === "compare") fields.push(["output (a)", row.output_a], ["output (b)", row.output_b]);
        else fields.push(["output", row.output], ["error", row.error]);
        for (const [k, v] of Object.entries(row.errors ?? {})) fields.push([`${k} error`, v]);
        for (const [k, v] of Object.entries(row.reasons ?? {})) fields.push([`${k} reason`, v]);
        for (const [k, v] of Object.entries(row.meta ?? {})) fields.push([k, v]);
        for (const [k, v] of fields) if (v !== undefined && v !== "") detail.append(h("span", { class: "lfx-key", text: k }), h("pre", { text: v }));
        const tracebacks: [string, string | undefined][] = [["error", row.traceback], ...Object.entries(row.error_tracebacks ?? {}).map(([k, v]): [string, string] => [`${k} error`, v])];
        for (const [k, tb] of tracebacks) if (tb) detail.append(h("span", { class: "lfx-key", text: `${k} traceback` }), h("details", { class: "lfx-err-tb" }, h("summary", { text: "show" }), h("pre", { text: tb })));
        if (row.node) {
          note.textContent = asked ? `opening the trace of ${row.key} below…` : "the kernel is not connected: no trace to open";
        } else note.textContent = "no trace for this trial (resumed from the manifest, or a loaded report)";
      }

      function update(): void {
        frame = 0;
        const t0 = performance.now();
        drawHead();
        const t1 = performance.now();
        recompute();
        const t2 = performance.now();
        drawRows();
        took("eval:head", t1 - t0);
        took("eval:filter+sort", t2 - t1);
        took("eval:rows", performance.now() - t2);
      }
      const schedule = () => { if (!frame) frame = requestAnimationFrame(update); };

      let filterTimer: ReturnType<typeof setTimeout> | undefined;
      filter.addEventListener("input", () => {
        clearTimeout(filterTimer);
        filterTimer = setTimeout(() => { view.query = filter.value; saveView(); schedule(); }, 120);
      });
      filter.addEventListener("keydown", (e) => e.stopPropagation()); // keep JupyterLab's shortcuts out
      flagged.addEventListener("change", () => { view.flagged = flagged.checked; saveView(); schedule(); });
      body.addEventListener("scroll", () => drawRows(), { passive: true });
      model.on("msg:custom", (msg: any) => {
        if (msg?.kind === KINDS.TRACE_OPENED) note.textContent = msg.ok ? `trace of ${view.selected ?? `node ${msg.id}`} opened below` : `no trace: ${msg.message ?? ""}`;
      });
      // the report's explorer, drawn once the first trace is opened (then reused by every click)
      let removeChild: (() => void) | null = null;
      const showTraces = async () => {
        if (removeChild || !model.get("trace_open")) return;
        removeChild = () => {};
        try {
          removeChild = await renderChild(model, host, model.get("explorer"), traces);
        } catch (err) {
          traces.append(h("div", { class: "lfx-err", text: `could not show the trace here: ${String(err)}` }));
        }
      };
      model.on("change:trace_open", () => void showTraces());
      void showTraces();
      shared.listeners.add(schedule);
      update();
      trySend(model, { kind: KINDS.SYNC, seq: shared.seq });
      const stop = onKernelGone(el, model, () => { note.textContent = "kernel restarted — clicks no longer open traces"; });
      return () => {
        stop();
        removeChild?.();
        shared.listeners.delete(schedule);
        if (frame) cancelAnimationFrame(frame);
      };
    },
  };
};

export { isFlagged };
