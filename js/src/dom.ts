// DOM helpers. Model and tool text is untrusted: it only ever reaches the page through
// textContent / attribute values set by code, never through an HTML-parsing sink.

export type Child = Node | string | null | undefined | false;

export function h(
  tag: string,
  attrs: Record<string, string | number | boolean | undefined> = {},
  ...children: Child[]
): HTMLElement {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (key === "class") node.className = String(value);
    else if (key === "text") node.textContent = String(value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

export function clear(node: Element): void {
  while (node.firstChild) node.removeChild(node.firstChild);
}

export function fmtDuration(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60_000)}m${Math.round((ms % 60_000) / 1000)}s`;
}

export function fmtCost(cost: number): string {
  if (!cost) return "";
  return cost < 0.01 ? `$${cost.toFixed(4)}` : `$${cost.toFixed(2)}`;
}

export function errorText(error: unknown): string {
  if (error === null || error === undefined || error === "") return "";
  if (typeof error === "string") return error;
  if (typeof error === "object") {
    const e = error as Record<string, unknown>;
    if ("message" in e || "type" in e) return `${String(e.type ?? "Error")}: ${String(e.message ?? "")}`;
  }
  return JSON.stringify(error);
}

/** A JSON value as a readable, collapsible tree built from DOM nodes (text only). */
export function jsonTree(value: unknown, depth = 0): HTMLElement {
  if (value === null || typeof value !== "object") {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    return h("span", { class: `lfx-v lfx-v-${value === null ? "null" : typeof value}`, text: text ?? "undefined" });
  }
  const entries: [string, unknown][] = Array.isArray(value)
    ? value.map((v, i) => [String(i), v])
    : Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return h("span", { class: "lfx-v", text: Array.isArray(value) ? "[]" : "{}" });
  const list = h("ul", { class: "lfx-json" });
  for (const [key, v] of entries) {
    list.append(h("li", {}, h("span", { class: "lfx-key", text: `${key}: ` }), jsonTree(v, depth + 1)));
  }
  return list;
}

/**
 * A tiny, safe Markdown subset for streamed text: headings, bullet lists, fenced code,
 * paragraphs, **bold**, *italic* and `code`. Built from DOM nodes; no HTML is interpreted.
 */
export function markdown(text: string): HTMLElement {
  const root = h("div", { class: "lfx-md" });
  const lines = text.split("\n");
  let para: string[] = [];
  let list: HTMLElement | null = null;
  let code: string[] | null = null;
  const flushPara = () => {
    if (para.length) root.append(inline("p", para.join("\n")));
    para = [];
  };
  for (const line of lines) {
    if (code !== null) {
      if (line.trimStart().startsWith("```")) {
        root.append(h("pre", {}, h("code", { text: code.join("\n") })));
        code = null;
      } else code.push(line);
      continue;
    }
    if (line.trimStart().startsWith("```")) {
      flushPara();
      list = null;
      code = [];
      continue;
    }
    const heading = /^(#{1,4})\s+(.*)$/.exec(line);
    const bullet = /^\s*[-*]\s+(.*)$/.exec(line);
    if (heading) {
      flushPara();
      list = null;
      root.append(inline(`h${heading[1].length + 2}`, heading[2]));
    } else if (bullet) {
      flushPara();
      if (!list) root.append((list = h("ul")));
      list.append(inline("li", bullet[1]));
    } else if (line.trim() === "") {
      flushPara();
      list = null;
    } else {
      list = null;
      para.push(line);
    }
  }
  if (code !== null) root.append(h("pre", {}, h("code", { text: code.join("\n") })));
  flushPara();
  return root;
}

function inline(tag: string, text: string): HTMLElement {
  const node = h(tag);
  const re = /(\*\*[^*]+\*\*|`[^`]+`|\*[^*\s][^*]*\*)/g;
  let last = 0;
  for (const m of text.matchAll(re)) {
    const i = m.index ?? 0;
    if (i > last) node.append(text.slice(last, i));
    const tok = m[0];
    if (tok.startsWith("**")) node.append(h("strong", { text: tok.slice(2, -2) }));
    else if (tok.startsWith("`")) node.append(h("code", { text: tok.slice(1, -1) }));
    else node.append(h("em", { text: tok.slice(1, -1) }));
    last = i + tok.length;
  }
  if (last < text.length) node.append(text.slice(last));
  return node;
}

export const BASE_CSS = `
.lfx{font:12px/1.4 var(--jp-ui-font-family,system-ui,sans-serif);color:var(--jp-ui-font-color1,#222);}
.lfx .lfx-muted{color:var(--jp-ui-font-color2,#777)}
.lfx .lfx-st{font-size:11px;padding:0 5px;border-radius:8px;white-space:nowrap}
.lfx .lfx-st-running{background:#e8f0fe;color:#1a56c4}
.lfx .lfx-st-ok{background:#e6f4ea;color:#137333}
.lfx .lfx-st-failed,.lfx .lfx-st-timed_out,.lfx .lfx-st-generation_failed,.lfx .lfx-st-parsing_failed{background:#fce8e6;color:#b3261e}
.lfx .lfx-st-denied,.lfx .lfx-st-cancelled{background:#fef7e0;color:#8a5a00}
.lfx ul.lfx-json{list-style:none;margin:0;padding-left:14px}
.lfx .lfx-key{color:var(--jp-ui-font-color2,#666)}
.lfx .lfx-v-string{white-space:pre-wrap;word-break:break-word}
.lfx pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font-family:var(--jp-code-font-family,monospace)}
.lfx .lfx-err{color:#b3261e;white-space:pre-wrap}
.lfx button{margin:2px 4px 2px 0;cursor:pointer}
`;

export function injectCss(el: HTMLElement, css: string): void {
  el.append(h("style", { text: BASE_CSS + css }));
}

/**
 * Calls `cb` once when the widget's kernel is gone (restarted, shut down, dead): from the
 * kernel connection's status, which the widget manager exposes, and from the
 * `jupyter-widgets-disconnected` class a widget manager may put on the view.
 */
export function onKernelGone(el: HTMLElement, model: unknown, cb: () => void): () => void {
  let fired = false;
  const fire = () => {
    if (!fired) {
      fired = true;
      cb();
    }
  };
  const check = () => {
    if (el.classList.contains("jupyter-widgets-disconnected")) fire();
  };
  const obs = new MutationObserver(check);
  obs.observe(el, { attributes: true, attributeFilter: ["class"] });
  queueMicrotask(check);
  let kernel: any = null;
  try {
    kernel = (model as any)?.widget_manager?.kernel ?? null;
  } catch {
    kernel = null;
  }
  // A kernel process that starts (again) after this view was drawn is a new kernel: it has
  // none of the widget models (a server-side restart shows up only as "starting").
  const onStatus = (_sender: unknown, status: string) => {
    if (["starting", "restarting", "autorestarting", "dead"].includes(status)) fire();
  };
  kernel?.statusChanged?.connect?.(onStatus);
  if (kernel?.status === "dead") queueMicrotask(fire);
  return () => {
    obs.disconnect();
    kernel?.statusChanged?.disconnect?.(onStatus);
  };
}

/** `model.send` that reports failure (a dead kernel throws "Cannot send") instead of throwing. */
export function trySend(model: { send(content: unknown): void }, content: unknown): boolean {
  try {
    model.send(content);
    return true;
  } catch {
    return false;
  }
}

/** An ISO time or a trace time (seconds on the session clock + `offset` to the epoch) as a
 *  local time of day; "" when it cannot be placed. */
export function localTime(at: unknown, offset?: number | null): string {
  let ms: number | null = null;
  if (typeof at === "string") {
    const t = Date.parse(at);
    if (!Number.isNaN(t)) ms = t;
  } else if (typeof at === "number" && typeof offset === "number") ms = (at + offset) * 1000;
  if (ms === null) return typeof at === "string" ? at : "";
  return new Date(ms).toLocaleTimeString();
}

/** When the user last scrolled or navigated by hand (wheel, touch, keys): a view that wants
 *  attention scrolls itself into view only if the user has not just moved elsewhere. */
const userMoved = { at: 0, installed: false };
export function lastUserScroll(): number {
  if (!userMoved.installed) {
    userMoved.installed = true;
    const mark = () => (userMoved.at = Date.now());
    window.addEventListener("wheel", mark, { capture: true, passive: true });
    window.addEventListener("touchmove", mark, { capture: true, passive: true });
    window.addEventListener("keydown", (ev) => {
      if (["PageUp", "PageDown", "Home", "End", "ArrowUp", "ArrowDown", " "].includes(ev.key)) mark();
    }, { capture: true });
  }
  return userMoved.at;
}

/** Approval prompts waiting on this page: shown in the page title while any waits. */
const waiting = new Set<string>();
let titleTimer: ReturnType<typeof setInterval> | undefined;
const TITLE_RE = /^\(\d+\) approval waiting · /;
function applyTitle(): void {
  const base = document.title.replace(TITLE_RE, "");
  document.title = waiting.size ? `(${waiting.size}) approval waiting · ${base}` : base;
}
export function setWaiting(id: string, on: boolean): void {
  if (on) waiting.add(id);
  else waiting.delete(id);
  applyTitle();
  if (waiting.size && !titleTimer) titleTimer = setInterval(applyTitle, 1000); // the app retitles tabs
  if (!waiting.size && titleTimer) {
    clearInterval(titleTimer);
    titleTimer = undefined;
  }
}

/** Marks the output that holds a drawn view (`lfx-live-child`): the static copy's CSS hides a
 *  widget output without the mark (a view that cannot draw) and shows the copy instead. The
 *  view may be attached to the page a few frames after it renders. */
export function markLive(el: HTMLElement, tries = 60): void {
  const child = el.closest(".jp-OutputArea-child");
  if (child) child.classList.add("lfx-live-child");
  else if (tries > 0) requestAnimationFrame(() => markLive(el, tries - 1));
}
