// BatchView: live progress of one lf.batch run — counts, rates, ETA, usage and cost (unknown
// shown as unknown), errors grouped by class with the first message; a group's button asks
// the kernel for a TraceExplorer of its items, shown below. Model text (error messages) is
// untrusted: it reaches the page through textContent only.
import { KINDS } from "./kinds";
import { clear, costLabel, h, injectCss, markLive, trySend } from "./dom";
import { SyncedState } from "./synced";
import { Host, renderChild } from "./child";
import { BatchPatch, BatchState, applyBatchPatch, emptyBatch, fmtCount, fmtProvider, fmtRate, fmtSeconds, fmtTokens, fraction, openTracesLabel } from "./batch";

interface Model {
  get(name: string): any;
  on(event: string, cb: (...args: any[]) => void): void;
  send(content: unknown): void;
  widget_manager?: any;
}

const CSS = `
.lfx-bv{border:1px solid var(--jp-border-color2,#e0e0e0);border-radius:4px;padding:6px 8px;background:var(--jp-layout-color0,#fff)}
.lfx-bv-head{display:flex;align-items:center;gap:8px;flex-wrap:wrap}
.lfx-bv-bar{position:relative;height:8px;border-radius:4px;margin:6px 0;background:var(--jp-layout-color2,#eee);overflow:hidden}
.lfx-bv-bar>span{position:absolute;top:0;bottom:0}
.lfx-bv-ok{left:0;background:var(--lfx-ok)}
.lfx-bv-bad{background:var(--lfx-bad)}
.lfx-bv-counts{display:flex;gap:14px;flex-wrap:wrap}
.lfx-bv-counts b{font-variant-numeric:tabular-nums}
.lfx-bv-stats{display:flex;gap:14px;flex-wrap:wrap;margin-top:2px}
.lfx-bv-groups{margin-top:6px;border-top:1px solid var(--jp-border-color2,#e0e0e0);padding-top:4px}
.lfx-bv-group{display:flex;gap:8px;align-items:baseline;padding:2px 0}
.lfx-bv .lfx-bv-group>*{flex:none;white-space:nowrap}
.lfx-bv .lfx-bv-group .lfx-bv-cls{font-weight:600}
.lfx-bv .lfx-bv-group .lfx-bv-msg{flex:1 1 auto;min-width:0;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.lfx-bv-group.lfx-bv-open{background:var(--jp-layout-color2,#f5f5f5)}
.lfx-bv-traces{margin-top:6px}
.lfx-bv-provider{margin-top:2px}
.lfx-bv-provider>div+div{padding-left:1.1em}
`;

const CHIP: Record<string, string> = { running: "running", done: "ok", "some failed": "some_failed", failed: "failed", stopped: "cancelled" };

export default () => {
  const state: BatchState = emptyBatch();
  const synced = new SyncedState<BatchPatch>((s) => {
    if (!("done" in s)) return false;
    Object.assign(state, emptyBatch(), s);
    return true;
  }, (p) => applyBatchPatch(state, p));
  return {
    initialize({ model }: { model: Model }) {
      synced.follow(model);
    },
    render({ model, el, host }: { model: Model; el: HTMLElement; host?: Host }) {
      const root = h("div", { class: "lfx lfx-bv" });
      injectCss(root, CSS);
      const head = h("div", { class: "lfx-bv-head" });
      const bar = h("div", { class: "lfx-bv-bar", role: "progressbar" });
      const ok = h("span", { class: "lfx-bv-ok" });
      const bad = h("span", { class: "lfx-bv-bad" });
      bar.append(ok, bad);
      const counts = h("div", { class: "lfx-bv-counts" });
      const stats = h("div", { class: "lfx-bv-stats lfx-muted" });
      const provider = h("div", { class: "lfx-bv-provider lfx-muted", "data-provider": "" });
      const groups = h("div", { class: "lfx-bv-groups" });
      const traces = h("div", { class: "lfx-bv-traces" });
      root.append(head, bar, counts, stats, provider, groups, traces);
      el.append(root);
      markLive(el);
      let gone = false;
      let shownExplorer = "";
      let removeChild = () => {};

      const showExplorer = async () => {
        const ref = String(model.get("explorer") ?? "");
        if (ref === shownExplorer) return;
        shownExplorer = ref;
        removeChild();
        removeChild = () => {};
        clear(traces);
        if (!ref) return;
        try {
          const remove = await renderChild(model, host, ref, traces);
          if (shownExplorer !== ref) return remove();
          removeChild = remove;
        } catch (err) {
          traces.append(h("div", { class: "lfx-err", text: `could not show the traces here: ${String(err)}` }));
        }
      };

      const draw = () => {
        clear(head);
        const status = state.status || "running";
        head.append(h("b", { class: "lfx-bv-title", text: state.title || state.name || "batch" }), h("span", { class: `lfx-st lfx-st-${CHIP[status] ?? "running"}`, "data-status": status, text: status }));
        if (gone && !state.finished) head.append(h("span", { class: "lfx-err", text: " kernel restarted — this batch stopped here" }));
        if (state.note) head.append(h("div", { class: "lfx-err lfx-bv-note", "data-note": "", text: state.note }));
        const share = fraction(state);
        ok.style.width = `${(share.done * 100).toFixed(2)}%`;
        bad.style.left = `${(share.done * 100).toFixed(2)}%`;
        bad.style.width = `${(share.failed * 100).toFixed(2)}%`;
        bar.setAttribute("aria-valuenow", String(state.done + state.failed));
        bar.setAttribute("aria-valuemax", String(state.total ?? ""));
        clear(counts);
        const count = (label: string, n: number | null, cls: string) =>
          h("span", { class: `lfx-bv-n lfx-bv-${cls}`, "data-count": cls }, h("b", { text: fmtCount(n) }), ` ${label}`);
        counts.append(
          count("done", state.done, "done"),
          count("failed", state.failed, "failed"),
          count("running", state.running, "running"),
          count("left", state.left, "left"),
          h("span", { class: "lfx-muted", text: `of ${fmtCount(state.total)}${state.resumed ? ` (${fmtCount(state.resumed)} resumed)` : ""}` }),
        );
        clear(stats);
        stats.append(
          h("span", { text: fmtRate(state.items_per_s, "items") }),
          h("span", { text: fmtRate(state.tokens_per_s, "tokens") }),
          h("span", { "data-eta": "", text: state.finished ? `took ${fmtSeconds(state.elapsed_s)}` : `ETA ${fmtSeconds(state.eta_s)}` }),
          h("span", { text: `${fmtCount(state.requests)} requests` }),
          h("span", { "data-usage": "", text: fmtTokens(state.usage) }),
          h("span", { "data-cost": "", text: costLabel(state.cost, state.unpriced_requests, state.unpriced_models) }),
        );
        clear(provider);
        const lines = fmtProvider(state.provider);
        provider.style.display = lines.length ? "" : "none";
        for (const line of lines) provider.append(h("div", { text: line }));
        clear(groups);
        groups.style.display = state.errors.length ? "" : "none";
        for (const g of state.errors) {
          const open = state.opened === g.type;
          const known = g.node_ids.filter((n) => n).length;
          const button = h("button", { class: "lfx-btn lfx-bv-open-btn", type: "button", "data-group": g.type, text: open ? "hide traces" : openTracesLabel(g) }) as HTMLButtonElement;
          if (known < g.count) button.title = `opens the traces of the first ${known} of these items, in input order`;
          button.disabled = !known;
          button.addEventListener("click", (ev) => {
            ev.stopPropagation();
            trySend(model, { kind: KINDS.OPEN_GROUP, type: open ? null : g.type });
          });
          groups.append(h("div", { class: `lfx-bv-group${open ? " lfx-bv-open" : ""}`, "data-error": g.type },
            h("span", { class: "lfx-bv-cls lfx-err", text: g.type }),
            h("span", { class: "lfx-bv-cnt", text: `× ${fmtCount(g.count)}` }),
            h("span", { class: "lfx-err lfx-bv-msg", title: g.first_message, text: g.first_message }),
            h("span", { class: "lfx-muted", text: g.items.length ? `items ${g.items.slice(0, 5).join(", ")}${g.count > 5 ? ", …" : ""}` : "" }),
            button));
        }
        if (state.open_error) groups.append(h("div", { class: "lfx-err", text: state.open_error }));
      };
      model.on("change:explorer", () => void showExplorer());
      const stop = synced.drawView(model, el, draw, () => {
        gone = true;
      });
      void showExplorer();
      return () => {
        stop();
        removeChild();
      };
    },
  };
};
