// The page side of the kernel's EventBridge, shared by the views that keep one plain state:
// a full state arrives in the synced `state` trait or a SNAPSHOT message, patches arrive in
// numbered EVENTS batches (a batch already seen is skipped); listeners redraw after each.
import { onKernelGone, trySend } from "./dom";
import { KINDS } from "./kinds";

interface Model {
  get(name: string): any;
  on(event: string, cb: (...args: any[]) => void): void;
  send(content: unknown): void;
}

export class SyncedState<P> {
  seq = 0;
  readonly listeners = new Set<() => void>();

  /** `load` adopts a full state and returns false when the value is not one; `apply` folds
   *  one patch into the state. */
  constructor(private readonly load: (s: any) => boolean, private readonly apply: (patch: P) => void) {}

  adopt(s: any): void {
    if (s && typeof s === "object" && this.load(s)) this.seq = typeof s.seq === "number" ? s.seq : this.seq;
  }

  notify(): void {
    for (const l of this.listeners) l();
  }

  /** Keep a view of this state drawn: now, then at most once a frame after changes. Asks the
   *  kernel for the patches this page missed (SYNC); when the kernel goes, calls `gone` and
   *  draws again. Returns what stops it. */
  drawView(model: Model, el: HTMLElement, draw: () => void, gone: () => void): () => void {
    let frame = 0;
    const listener = () => {
      if (!frame) {
        frame = requestAnimationFrame(() => {
          frame = 0;
          draw();
        });
      }
    };
    this.listeners.add(listener);
    draw();
    trySend(model, { kind: KINDS.SYNC, seq: this.seq });
    const stopWatching = onKernelGone(el, model, () => {
      gone();
      listener();
    });
    return () => {
      stopWatching();
      this.listeners.delete(listener);
      if (frame) cancelAnimationFrame(frame);
    };
  }

  follow(model: Model): void {
    this.adopt(model.get("state"));
    model.on("change:state", () => {
      const s = model.get("state");
      if (!s || typeof s.seq !== "number") return;
      if (s.seq > this.seq || (s.seq === 0 && this.seq === 0)) {
        this.adopt(s);
        this.notify();
      }
    });
    model.on("msg:custom", (msg: any) => {
      if (msg?.kind === KINDS.EVENTS) {
        if (typeof msg.seq === "number" && msg.seq <= this.seq) return;
        this.seq = msg.seq ?? this.seq;
        for (const p of msg.events as P[]) this.apply(p);
      } else if (msg?.kind === KINDS.SNAPSHOT) this.adopt({ ...msg.state, seq: msg.seq });
      else return;
      this.notify();
    });
  }
}
