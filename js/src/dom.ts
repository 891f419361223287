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

/** A synced state trait: JSON as bytes (a DataView, typed array or ArrayBuffer), or an
 *  object already decoded; null when empty. */
export function decodeState(raw: any): any {
  if (!raw) return null;
  if (raw instanceof DataView || ArrayBuffer.isView(raw)) {
    const view = raw as ArrayBufferView;
    const text = new TextDecoder().decode(new Uint8Array(view.buffer, view.byteOffset, view.byteLength));
    return text ? JSON.parse(text) : null;
  }
  if (raw instanceof ArrayBuffer) return JSON.parse(new TextDecoder().decode(new Uint8Array(raw)));
  return typeof raw === "object" ? raw : null;
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
  return cost ? fmtMoney(cost) : "";
}

/** "$1.23"; below a cent at least four decimals and as many more as keep two significant
 * digits ("$0.0042", "$0.000011"); never "" for 0 (langfx_nb/agentic/usage.py fmt_money,
 * same text). */
export function fmtMoney(cost: number): string {
  if (cost >= 0.01) return `$${cost.toFixed(2)}`;
  const exponent = cost > 0 ? Number(cost.toExponential().split("e")[1]) : 0;
  return `$${cost.toFixed(Math.min(100, Math.max(4, 1 - exponent)))}`;
}

/** A cost total as a reader should see it (langfx_nb/agentic/usage.py cost_label, same
 * text): "$1.23"; "≥ $1.23 (3 calls unpriced)" when calls without a price are left out of
 * it; "cost unknown (3 calls unpriced)" when none had a price; never an unknown as "$0". */
export function costLabel(cost: number | null | undefined, unpriced = 0, models: string[] = []): string {
  const names = models.join(", ");
  let why = "";
  if (unpriced) why = `${unpriced.toLocaleString("en-US")} call${unpriced === 1 ? "" : "s"} unpriced${names ? `: ${names}` : ""}`;
  else if (names) why = `no price for ${names}`;
  if (typeof cost !== "number") return why ? `cost unknown (${why})` : "cost unknown";
  return why ? `≥ ${fmtMoney(cost)} (${why})` : fmtMoney(cost);
}

/** A noun as a count of `n` takes it: "node" for 1, "nodes" otherwise ("1 node"; the
 *  kernel's text forms use langfx_nb/notebook/render.py counted, same rule). */
export function plural(n: number, noun: string): string {
  return n === 1 ? noun : `${noun}s`;
}

/** The cost part of a summary line: "total cost $1.23", or "cost unknown (…)" on its own
 *  (never "total cost cost unknown"). */
export function totalCostText(cost: number | null | undefined, unpriced = 0, models: string[] = []): string {
  const label = costLabel(cost, unpriced, models);
  return label.startsWith("cost unknown") ? label : `total cost ${label}`;
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

/** A failed batch item's traceback (its trace node's `error.traceback`), or "". */
export function errorTraceback(error: unknown): string {
  if (error !== null && typeof error === "object") {
    const tb = (error as Record<string, unknown>).traceback;
    if (typeof tb === "string") return tb;
  }
  return "";
}

/** What copying an error gives: its class and message, then its traceback when it has one. */
export function errorCopyText(error: unknown): string {
  const tb = errorTraceback(error);
  return tb ? `${errorText(error)}\n\n${tb}` : errorText(error);
}

/** An error as a detail pane shows it: class and message, the traceback folded (on demand). */
export function errorBox(error: unknown): HTMLElement {
  const box = h("div", { class: "lfx-err", text: errorText(error) });
  const tb = errorTraceback(error);
  if (tb) box.append(h("details", { class: "lfx-err-tb" }, h("summary", { text: "traceback" }), h("pre", { text: tb })));
  return box;
}

/** Copy `text` to the clipboard (the async API, else a hidden textarea); true when copied. */
export async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = h("textarea", { style: "position:fixed;left:-9999px;top:0" }) as HTMLTextAreaElement;
    area.value = text;
    document.body.append(area);
    area.select();
    let ok = false;
    try {
      ok = document.execCommand("copy");
    } catch {
      ok = false;
    }
    area.remove();
    return ok;
  }
}

/** A small "Copy" button; `get` is called on click, so it copies what is shown then. */
export function copyButton(get: () => string, label = "Copy"): HTMLElement {
  const b = h("button", { class: "lfx-btn lfx-copy", type: "button", title: "Copy to the clipboard", text: label }) as HTMLButtonElement;
  b.addEventListener("click", async (ev) => {
    ev.stopPropagation();
    const text = get();
    b.dataset.copied = text;
    const ok = await copyText(text);
    b.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => (b.textContent = label), 1200);
  });
  return b;
}

/** The text a copy button copies for a value: strings as they are, the rest as JSON. */
export function asText(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2) ?? String(value);
}

export const FOLD_CHARS = 1200;
export const FOLD_LINES = 24;

/** What folded text shows: `FOLD_LINES` lines from the line holding offset `at` (from the
 *  start without it), cut at `FOLD_CHARS`; `before`/`after`: whether text is left out there. */
export function foldWindow(text: string, at = 0): { head: string; before: boolean; after: boolean } {
  const from = at > 0 ? text.lastIndexOf("\n", at - 1) + 1 : 0;
  const lines = text.slice(from).split("\n");
  let head = lines.slice(0, FOLD_LINES).join("\n");
  if (head.length > FOLD_CHARS) head = head.slice(0, FOLD_CHARS);
  return { head, before: from > 0, after: from + head.length < text.length };
}

/** Long text shown folded with a "show all" button; short text as is. Folded, it shows its
 *  first lines, or with `at` the lines from offset `at` on (a prompt opens on the user's
 *  request, not on the protocol's instructions before it). */
export function foldText(text: string, cls = "lfx-text", at = 0): HTMLElement {
  const lines = text.split("\n");
  const long = text.length > FOLD_CHARS || lines.length > FOLD_LINES;
  const pre = h("pre", { class: cls });
  if (!long) {
    pre.textContent = text;
    return pre;
  }
  const fold = foldWindow(text, at);
  const folded = (fold.before ? "…\n" : "") + fold.head + (fold.after ? "…" : "");
  pre.textContent = folded;
  const more = h("button", { class: "lfx-btn lfx-more", type: "button", text: `show all (${text.length.toLocaleString("en-US")} chars)` });
  more.addEventListener("click", (ev) => {
    ev.stopPropagation();
    const open = more.dataset.open === "1";
    pre.textContent = open ? folded : text;
    more.dataset.open = open ? "" : "1";
    more.textContent = open ? `show all (${text.length.toLocaleString("en-US")} chars)` : "show less";
  });
  return h("div", { class: "lfx-fold" }, pre, more);
}

/** Where a rendered prompt holds the user's own request: the start of the line with the
 *  last occurrence of the template's longest literal piece (its `{{ }}` parts are filled in
 *  by rendering), and of the label line just above it when that ends with ":" (a
 *  protocol's "REQUEST:"); 0 when it is not found. */
export function requestAt(rendered: string, template: string): number {
  const pieces = template.split(/\{\{[\s\S]*?\}\}|\{%[\s\S]*?%\}/).map((p) => p.trim()).filter((p) => p);
  const probe = pieces.sort((a, b) => b.length - a.length)[0]?.split("\n")[0];
  if (!probe) return 0;
  const found = rendered.lastIndexOf(probe);
  if (found <= 0) return 0;
  let line = rendered.lastIndexOf("\n", found - 1) + 1;
  const above = rendered.slice(0, Math.max(0, line - 1));
  const label = above.slice(above.lastIndexOf("\n") + 1);
  if (label.trim().endsWith(":")) line -= label.length + 1;
  return Math.max(0, line);
}

/** A JSON value as a readable tree built from DOM nodes (text only): objects and arrays fold
 *  (open to `openDepth`), long strings fold, no list bullets. */
export function jsonTree(value: unknown, depth = 0, openDepth = 2): HTMLElement {
  if (value === null || typeof value !== "object") {
    if (typeof value === "string" && (value.length > 160 || value.includes("\n"))) return foldText(value, "lfx-v lfx-v-string");
    const text = typeof value === "string" ? value : JSON.stringify(value);
    return h("span", { class: `lfx-v lfx-v-${value === null ? "null" : typeof value}`, text: text ?? "undefined" });
  }
  const entries: [string, unknown][] = Array.isArray(value)
    ? value.map((v, i) => [String(i), v])
    : Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return h("span", { class: "lfx-v", text: Array.isArray(value) ? "[]" : "{}" });
  const list = h("ul", { class: "lfx-json" });
  for (const [key, v] of entries) {
    const nested = v !== null && typeof v === "object" && Object.keys(v as object).length > 0;
    if (nested) {
      const n = Object.keys(v as object).length;
      const details = h("details", { class: "lfx-jd" }) as HTMLDetailsElement;
      details.open = depth + 1 < openDepth;
      details.append(
        h("summary", {}, h("span", { class: "lfx-key", text: `${key}: ` }), h("span", { class: "lfx-muted", text: Array.isArray(v) ? `[${n}]` : `{${n}}` })),
        jsonTree(v, depth + 1, openDepth),
      );
      list.append(h("li", {}, details));
    } else list.append(h("li", {}, h("span", { class: "lfx-key", text: `${key}: ` }), jsonTree(v, depth + 1, openDepth)));
  }
  return list;
}

interface Turn {
  role: string;
  text?: unknown;
  open_at?: number; // a long text opens there (foldText's `at`)
  tool_calls?: { id?: unknown; name?: unknown; args?: unknown }[];
  call_id?: unknown;
}

function isTurn(v: unknown): v is Turn {
  return !!v && typeof v === "object" && !Array.isArray(v) && typeof (v as any).role === "string" &&
    ("text" in (v as object) || "tool_calls" in (v as object));
}

/** The turns of a message preview (`{role, text}`, a list of them, or `{omitted_turns, turns}`);
 *  null when the value is not a message. */
export function messageTurns(value: unknown): { turns: Turn[]; omitted: number } | null {
  if (isTurn(value)) return { turns: [value], omitted: 0 };
  if (Array.isArray(value) && value.length > 0 && value.every(isTurn)) return { turns: value as Turn[], omitted: 0 };
  if (value && typeof value === "object" && Array.isArray((value as any).turns) && (value as any).turns.every(isTurn)) {
    return { turns: (value as any).turns, omitted: Number((value as any).omitted_turns ?? 0) };
  }
  return null;
}

/** Messages as a chat: one block per turn with its role, the text folded when long, tool
 *  calls and tool results as their own blocks. */
export function chatView(value: unknown): HTMLElement | null {
  const found = messageTurns(value);
  if (!found) return null;
  const root = h("div", { class: "lfx-chat" });
  if (found.omitted) root.append(h("div", { class: "lfx-muted", text: `… ${found.omitted} earlier turns not kept` }));
  for (const turn of found.turns) {
    const role = String(turn.role);
    const isResult = turn.call_id != null;
    const block = h("div", { class: `lfx-msg lfx-msg-${role.replace(/[^a-z_]/gi, "")}${isResult ? " lfx-msg-result" : ""}` });
    const text = turn.text == null ? "" : String(turn.text);
    block.append(h("div", { class: "lfx-msg-head" },
      h("span", { class: "lfx-msg-role", text: isResult ? `tool result (${String(turn.call_id)})` : role }),
      text ? copyButton(() => text) : ""));
    if (text) block.append(foldText(text, "lfx-text", typeof turn.open_at === "number" ? turn.open_at : 0));
    for (const call of turn.tool_calls ?? []) {
      block.append(h("div", { class: "lfx-msg lfx-msg-call" },
        h("div", { class: "lfx-msg-head" },
          h("span", { class: "lfx-msg-role", text: `tool call ${String(call.name ?? "")}` }),
          h("span", { class: "lfx-muted", text: ` ${String(call.id ?? "")}` }),
          copyButton(() => asText(call.args ?? {}))),
        jsonTree(call.args ?? {})));
    }
    root.append(block);
  }
  return root;
}

/** One value of a detail pane, shown for reading: messages as a chat, text folded, data as a
 *  folding tree. Objects holding messages (e.g. `{prompt: …}`) show those as a chat too. */
export function readable(value: unknown): HTMLElement {
  const chat = chatView(value);
  if (chat) return chat;
  if (typeof value === "string") return foldText(value);
  if (value && typeof value === "object" && !Array.isArray(value)) {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.some(([, v]) => messageTurns(v) || (typeof v === "string" && v.length > 160))) {
      const box = h("div", { class: "lfx-fields" });
      for (const [k, v] of entries) box.append(h("div", { class: "lfx-key lfx-field-name", text: k }), readable(v));
      return box;
    }
  }
  return jsonTree(value);
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

// Colours come from JupyterLab's theme variables (fallbacks: the light theme), so the
// widgets read well in light and dark themes. Status colours tint a chip's background and
// border; its text stays the theme's text colour, so it keeps the theme's contrast.
// "suspended" (saved for `%lf resume`, nothing ran) is the theme's info colour, dashed: it
// waits like "running" but nothing is running.
export const BASE_CSS = `
.lfx{font:12px/1.4 var(--jp-ui-font-family,system-ui,sans-serif);color:var(--jp-ui-font-color1,#222);
  --lfx-ok:var(--jp-success-color1,#4caf50);--lfx-bad:var(--jp-error-color1,#f44336);--lfx-warn:var(--jp-warn-color1,#ff9800);
  --lfx-run:var(--jp-brand-color1,#2196f3);--lfx-paused:var(--jp-info-color1,#0097a7);--lfx-fg0:var(--jp-ui-font-color0,#000)}
.lfx .lfx-muted{color:var(--jp-ui-font-color2,#757575)}
.lfx .lfx-st{display:inline-block;box-sizing:border-box;min-width:72px;text-align:center;font-size:11px;line-height:16px;padding:0 6px;border-radius:8px;white-space:nowrap;
  color:var(--jp-ui-font-color1,#222);--lfx-c:var(--jp-border-color1,#bdbdbd);border:1px solid var(--lfx-c);background:color-mix(in srgb,var(--lfx-c) 22%,transparent)}
.lfx .lfx-st-running,.lfx .lfx-st-streaming{--lfx-c:var(--lfx-run)}
.lfx .lfx-st-ok,.lfx .lfx-st-complete,.lfx .lfx-st-done{--lfx-c:var(--lfx-ok)}
.lfx .lfx-st-failed,.lfx .lfx-st-timed_out,.lfx .lfx-st-generation_failed,.lfx .lfx-st-parsing_failed,.lfx .lfx-st-validation_failed{--lfx-c:var(--lfx-bad)}
.lfx .lfx-st-denied,.lfx .lfx-st-cancelled,.lfx .lfx-st-ended,.lfx .lfx-st-some_failed,.lfx .lfx-st-warning{--lfx-c:var(--lfx-warn)}
.lfx .lfx-st-error{--lfx-c:var(--lfx-bad)}
.lfx .lfx-st-suspended{--lfx-c:var(--lfx-paused);border-style:dashed}
.lfx .lfx-st-waiting{--lfx-c:var(--lfx-paused)}
.lfx ul.lfx-json,.lfx ul.lfx-json>li{list-style:none;margin:0}
.lfx ul.lfx-json{padding-left:14px}
.lfx details.lfx-jd>summary{cursor:pointer;list-style:none}
.lfx details.lfx-jd>summary::-webkit-details-marker{display:none}
.lfx details.lfx-jd>summary::before{content:"▸ ";color:var(--jp-ui-font-color1,#222)}
.lfx details.lfx-jd[open]>summary::before{content:"▾ "}
.lfx .lfx-key{color:var(--jp-ui-font-color2,#616161)}
.lfx .lfx-v-string{white-space:pre-wrap;word-break:break-word}
.lfx pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font-family:var(--jp-code-font-family,monospace);font-size:12px}
.lfx .lfx-err{color:color-mix(in srgb,var(--lfx-bad) 72%,var(--lfx-fg0));white-space:pre-wrap}
.lfx .lfx-err-tb>pre{margin:4px 0 0;font-size:11px;overflow-x:auto;white-space:pre}
.lfx .lfx-btn,.lfx button{font:inherit;font-size:11px;margin:2px 4px 2px 0;padding:1px 8px;cursor:pointer;border-radius:4px;
  border:1px solid var(--jp-border-color1,#bdbdbd);background:var(--jp-layout-color1,#fff);color:var(--jp-ui-font-color1,#222)}
.lfx button:hover{background:var(--jp-layout-color2,#eee)}
.lfx button:disabled{opacity:.5;cursor:default}
.lfx button.lfx-primary{background:var(--jp-brand-color1,#2196f3);border-color:var(--jp-brand-color0,#1976d2);color:#fff;font-weight:600}
.lfx button.lfx-primary:hover{background:var(--jp-brand-color0,#1976d2)}
.lfx button.lfx-danger{background:transparent;border-color:var(--lfx-bad);color:color-mix(in srgb,var(--lfx-bad) 72%,var(--lfx-fg0))}
.lfx button.lfx-danger:hover{background:color-mix(in srgb,var(--lfx-bad) 15%,transparent)}
.lfx button.lfx-copy{padding:0 6px;font-size:10px;float:none}
.lfx .lfx-fold>button.lfx-more{margin-top:2px}
.lfx .lfx-chat{display:flex;flex-direction:column;gap:6px}
.lfx .lfx-msg{border:1px solid var(--jp-border-color2,#e0e0e0);border-left:3px solid var(--jp-border-color1,#bdbdbd);border-radius:4px;padding:4px 8px;background:var(--jp-layout-color1,#fff)}
.lfx .lfx-msg-system{border-left-color:var(--lfx-warn)}
.lfx .lfx-msg-user{border-left-color:var(--lfx-run)}
.lfx .lfx-msg-assistant,.lfx .lfx-msg-ai,.lfx .lfx-msg-model{border-left-color:var(--lfx-ok)}
.lfx .lfx-msg-result,.lfx .lfx-msg-tool{border-left-color:var(--jp-ui-font-color2,#757575)}
.lfx .lfx-msg-reasoning{border-left-style:dashed;border-left-color:var(--jp-ui-font-color2,#757575);color:var(--jp-ui-font-color2,#757575)}
.lfx .lfx-msg-call{margin-top:4px;background:var(--jp-layout-color2,#f5f5f5)}
.lfx .lfx-msg-head{display:flex;align-items:center;gap:6px;margin-bottom:2px}
.lfx .lfx-msg-role{font-weight:600;text-transform:capitalize;font-size:11px}
.lfx .lfx-msg-head .lfx-copy{margin-left:auto}
.lfx .lfx-field-name{margin-top:4px}
`;

export function injectCss(el: HTMLElement, css: string): void {
  el.append(h("style", { text: BASE_CSS + css }));
}

/**
 * Calls `cb` once when the widget's kernel is gone (restarted, shut down, dead): from the
 * kernel connection's status, which the widget manager exposes; from the
 * `jupyter-widgets-disconnected` class a widget manager may put on the view; and from the
 * kernel's own messages. A kernel told to shut down or restart announces it to every client
 * (a `shutdown_reply` on IOPub), and every kernel process signs its messages with a session
 * id of its own, so a message under a new one means a new kernel. A restart asked of the
 * server by someone else gives the page no status change it can rely on: the new kernel's
 * "starting" is often sent before the page's connection hears it.
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
  let session: string | null = null;
  const onIopub = (_sender: unknown, msg: any) => {
    if (msg?.header?.msg_type === "shutdown_reply") return fire();
    const id = msg?.header?.session;
    if (typeof id !== "string" || !id) return;
    if (session === null) session = id;
    else if (id !== session) fire();
  };
  kernel?.iopubMessage?.connect?.(onIopub);
  return () => {
    obs.disconnect();
    kernel?.statusChanged?.disconnect?.(onStatus);
    kernel?.iopubMessage?.disconnect?.(onIopub);
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
