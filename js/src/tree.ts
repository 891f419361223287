// Pure trace-tree logic (no DOM): the store the live events merge into, roll-ups, the
// filtered/expanded list of visible rows, and the virtual window. Unit-tested in js/test.

export interface TraceNode {
  id: string;
  parent?: string | null;
  kind?: string;
  name?: string;
  status?: string;
  start?: number | null;
  end?: number | null;
  usage?: Record<string, number | null> | null;
  cost?: number | null;
  error?: unknown;
  [key: string]: unknown;
}

export interface Patch {
  op: string;
  id?: string;
  [key: string]: unknown;
}

export interface Rollup {
  tokens: number;
  cost: number;
  descendants: number;
}

export interface Row {
  id: string;
  depth: number;
  hasChildren: boolean;
  expanded: boolean;
  match: boolean;
}

export class TraceStore {
  nodes = new Map<string, TraceNode>();
  /** Bumped on every change; derived data is cached per version. */
  version = 0;
  private structure = -1;
  private kids = new Map<string, string[]>();
  private rootIds: string[] = [];
  private rollupVersion = -1;
  private rollupCache = new Map<string, Rollup>();

  apply(patch: Patch): void {
    if (patch.op !== "node" || typeof patch.id !== "string") return;
    const { op: _op, ...fields } = patch;
    const current = this.nodes.get(patch.id);
    if (current) Object.assign(current, fields);
    else this.nodes.set(patch.id, { status: "running", parent: null, ...fields } as TraceNode);
    this.version++;
  }

  load(nodes: TraceNode[]): void {
    this.nodes.clear();
    for (const n of nodes) this.nodes.set(String(n.id), { ...n, id: String(n.id) });
    this.version++;
  }

  private ensureStructure(): void {
    if (this.structure === this.version) return;
    this.kids.clear();
    this.rootIds = [];
    for (const node of this.nodes.values()) {
      const parent = node.parent;
      if (parent != null && parent !== node.id && this.nodes.has(parent)) {
        let list = this.kids.get(parent);
        if (!list) this.kids.set(parent, (list = []));
        list.push(node.id);
      } else this.rootIds.push(node.id);
    }
    this.structure = this.version;
  }

  children(id: string): string[] {
    this.ensureStructure();
    return this.kids.get(id) ?? [];
  }

  roots(): string[] {
    this.ensureStructure();
    return this.rootIds;
  }

  /** Tokens and cost of each node including all descendants (iterative post-order). */
  rollups(): Map<string, Rollup> {
    if (this.rollupVersion === this.version) return this.rollupCache;
    this.ensureStructure();
    const out = new Map<string, Rollup>();
    const stack: [string, boolean][] = this.rootIds.map((id) => [id, false]);
    while (stack.length) {
      const [id, visited] = stack.pop()!;
      if (!visited) {
        stack.push([id, true]);
        for (const c of this.kids.get(id) ?? []) stack.push([c, false]);
        continue;
      }
      const node = this.nodes.get(id)!;
      const own: Rollup = { tokens: tokensOf(node), cost: costOf(node), descendants: 0 };
      for (const c of this.kids.get(id) ?? []) {
        const r = out.get(c);
        if (!r) continue;
        own.tokens += r.tokens;
        own.cost += r.cost;
        own.descendants += r.descendants + 1;
      }
      out.set(id, own);
    }
    this.rollupCache = out;
    this.rollupVersion = this.version;
    return out;
  }
}

export function tokensOf(node: TraceNode): number {
  const u = node.usage;
  if (!u || typeof u !== "object") return 0;
  if (typeof u.total_tokens === "number") return u.total_tokens;
  return (typeof u.prompt_tokens === "number" ? u.prompt_tokens : 0) +
    (typeof u.completion_tokens === "number" ? u.completion_tokens : 0);
}

export function costOf(node: TraceNode): number {
  if (typeof node.cost === "number") return node.cost;
  const u = node.usage as Record<string, unknown> | null | undefined;
  return u && typeof u.cost === "number" ? u.cost : 0;
}

/** Trace times are seconds on the session's clock; a running node has no duration yet. */
export function durationMs(node: TraceNode): number | null {
  if (typeof node.start !== "number" || typeof node.end !== "number") return null;
  return Math.max(0, (node.end - node.start) * 1000);
}

/** The text a search matches against: name, kind, status, error. */
export function searchText(node: TraceNode): string {
  const err = node.error == null ? "" : typeof node.error === "string" ? node.error : JSON.stringify(node.error);
  return `${node.name ?? ""} ${node.kind ?? ""} ${node.status ?? ""} ${err}`.toLowerCase();
}

/** Default expansion when the user has not toggled a node: nodes at depth 0 and 1 are open. */
export const DEFAULT_OPEN_DEPTH = 2;

/**
 * The rows to show, in tree order. Without a query, a node's children are listed when it is
 * expanded (user choice, else the depth default). With a query, every match is listed and so
 * are all its ancestors (opened along the way), whatever their own expansion state.
 */
export function visibleRows(store: TraceStore, expanded: Map<string, boolean>, query = ""): Row[] {
  const q = query.trim().toLowerCase();
  const rows: Row[] = [];
  let keep: Set<string> | null = null;
  let matches: Set<string> | null = null;
  if (q) {
    keep = new Set();
    matches = new Set();
    for (const node of store.nodes.values()) {
      if (!searchText(node).includes(q)) continue;
      matches.add(node.id);
      let cur: TraceNode | undefined = node;
      const seen = new Set<string>();
      while (cur && !keep.has(cur.id) && !seen.has(cur.id)) {
        seen.add(cur.id);
        keep.add(cur.id);
        cur = cur.parent != null ? store.nodes.get(cur.parent) : undefined;
      }
    }
  }
  const stack: [string, number][] = [];
  const roots = store.roots();
  for (let i = roots.length - 1; i >= 0; i--) stack.push([roots[i], 0]);
  while (stack.length) {
    const [id, depth] = stack.pop()!;
    if (keep && !keep.has(id)) continue;
    const kids = store.children(id);
    const visibleKids = keep ? kids.filter((k) => keep!.has(k)) : kids;
    const open = keep ? visibleKids.length > 0 : expanded.get(id) ?? depth < DEFAULT_OPEN_DEPTH;
    rows.push({ id, depth, hasChildren: visibleKids.length > 0, expanded: open, match: matches ? matches.has(id) : false });
    if (open) for (let i = visibleKids.length - 1; i >= 0; i--) stack.push([visibleKids[i], depth + 1]);
  }
  return rows;
}

/** Which rows to put in the DOM for a scroll position: [start, end) with some overscan. */
export function windowRange(scrollTop: number, viewport: number, rowHeight: number, total: number, overscan = 8): [number, number] {
  const first = Math.floor(Math.max(0, scrollTop) / rowHeight);
  const count = Math.ceil(Math.max(0, viewport) / rowHeight);
  const start = Math.max(0, first - overscan);
  const end = Math.min(total, first + count + overscan);
  return [start, Math.max(start, end)];
}
