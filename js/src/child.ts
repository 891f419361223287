// A widget drawn inside another widget's view (the trace explorer inside the batch view and
// the evaluation report), so a composite view is one anywidget output in every host.
//
// The Python side holds the child in a trait serialized by ipywidgets (`IPY_MODEL_<id>`).
// Jupyter's widget manager draws it (`create_view`: JupyterLab, Notebook, Colab's ipywidgets
// 7.7 with anywidget 0.9); where the page has no such manager (marimo, which keeps only
// anywidget models), anywidget's `host.getWidget` (anywidget >= 0.11) draws it.

/** What the host gives `render` besides `model` and `el` (anywidget >= 0.11). */
export interface Host {
  getWidget(ref: string): Promise<{ render(opts: { el: HTMLElement; signal?: AbortSignal }): Promise<void> }>;
}

/** The model id in a child reference (`IPY_MODEL_<id>` or `anywidget:<id>`); "" for none. */
export function childId(ref: unknown): string {
  if (typeof ref !== "string") return "";
  return ref.replace(/^IPY_MODEL_/, "").replace(/^anywidget:/, "");
}

/** Draws the child `ref` into `into`; resolves to a function that removes it. Throws when the
 *  page can draw no child widget (neither a widget manager nor an anywidget host). */
export async function renderChild(model: any, host: Host | undefined, ref: unknown, into: HTMLElement): Promise<() => void> {
  const id = childId(ref);
  if (!id) return () => {};
  const manager = model?.widget_manager;
  if (typeof manager?.create_view === "function") {
    const child = await manager.get_model(id);
    const view = await manager.create_view(child, {});
    into.append(view.el);
    view.trigger?.("displayed");
    return () => view.remove?.();
  }
  if (host && typeof host.getWidget === "function") {
    const abort = new AbortController();
    const box = document.createElement("div");
    into.append(box);
    const widget = await host.getWidget(`anywidget:${id}`);
    await widget.render({ el: box, signal: abort.signal });
    return () => {
      abort.abort();
      box.remove();
    };
  }
  throw new Error("this page draws no widget inside another");
}
