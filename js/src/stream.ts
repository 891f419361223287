// Pure StreamView state: patches from the kernel (see stream_view.py StreamReducer) applied to
// a partial JSON value, the set of open/completed field paths, and the terminal status.

export type PathKey = string | number;

export interface StreamState {
  mode: "object" | "text" | "idle";
  value: unknown;
  text: string;
  open: string[];
  done: string[];
  status: string;
  error: string | null;
  tools: Record<string, ToolCallView>;
  /** Top-level fields of the answer's schema (placeholders until they start). */
  fields: { name: string; required: boolean }[];
  /** Validation message per field path key, when the answer failed validation. */
  field_errors: Record<string, string>;
  /** Path keys of required fields the answer left out. */
  missing: string[];
  title: string;
  seq?: number;
}

/** A streamed tool call: display only (partial arguments are never executed). */
export interface ToolCallView {
  name: string;
  args_text: string;
  args?: unknown;
  done: boolean;
}

export function emptyStream(): StreamState {
  return { mode: "idle", value: null, text: "", open: [], done: [], status: "idle", error: null, tools: {}, fields: [], field_errors: {}, missing: [], title: "" };
}

export const pathKey = (path: PathKey[]): string => JSON.stringify(path);

function setAt(root: unknown, path: PathKey[], fn: (old: unknown) => unknown): unknown {
  if (path.length === 0) return fn(root);
  const [head, ...rest] = path;
  let container: Record<string, unknown> | unknown[];
  if (typeof head === "number") container = Array.isArray(root) ? root : [];
  else container = root && typeof root === "object" && !Array.isArray(root) ? (root as Record<string, unknown>) : {};
  const old = (container as Record<string | number, unknown>)[head as never];
  (container as Record<string | number, unknown>)[head as never] = setAt(old, rest, fn);
  return container;
}

export function applyStreamPatch(state: StreamState, patch: Record<string, unknown>): void {
  const path = (patch.path as PathKey[] | undefined) ?? [];
  switch (patch.op) {
    case "reset": // the schema's fields and the title describe the view, not one stream
      Object.assign(state, emptyStream(), { mode: patch.mode ?? "object", status: "streaming", fields: state.fields, title: state.title });
      break;
    case "set":
      state.mode = "object";
      state.value = setAt(state.value, path, () => patch.value);
      break;
    case "open": {
      const key = pathKey(path);
      if (!state.open.includes(key)) state.open.push(key);
      if (patch.value !== undefined) state.value = setAt(state.value, path, (old) => old ?? patch.value);
      break;
    }
    case "append":
      state.value = setAt(state.value, path, (old) => (typeof old === "string" ? old : "") + String(patch.delta ?? ""));
      break;
    case "done": {
      const key = pathKey(path);
      state.open = state.open.filter((k) => k !== key);
      if (!state.done.includes(key)) state.done.push(key);
      if ("value" in patch) state.value = setAt(state.value, path, () => patch.value);
      break;
    }
    case "text":
      state.mode = "text";
      state.text += String(patch.delta ?? "");
      break;
    case "tool": {
      const id = String(patch.id);
      const t = (state.tools[id] ??= { name: "", args_text: "", done: false });
      if (typeof patch.name === "string") t.name = patch.name;
      if (typeof patch.delta === "string") t.args_text += patch.delta;
      if ("args" in patch) {
        t.args = patch.args;
        t.done = true;
      }
      break;
    }
    case "status":
      state.status = String(patch.status);
      if (patch.error != null) state.error = String(patch.error);
      if ("value" in patch && patch.value !== undefined) state.value = patch.value;
      if (patch.field_errors && typeof patch.field_errors === "object") {
        state.field_errors = { ...(patch.field_errors as Record<string, string>) };
        state.missing = Array.isArray(patch.missing) ? (patch.missing as string[]).slice() : [];
      }
      break;
  }
}
