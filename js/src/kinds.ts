// Comm message kinds: mirror of langfx_nb/notebook/bridge.py MessageKind.
// tests/notebook/test_widgets_bundle.py keeps the two equal; change both together.
export const KINDS = {
  "EVENTS": "events",
  "SNAPSHOT": "snapshot",
  "SYNC": "sync",
  "RENDERED": "rendered",
  "DECISION": "decision",
  "DECISION_RESULT": "decision_result",
  "DETAIL_REQUEST": "detail_request",
  "DETAIL": "detail",
  "CANCEL": "cancel",
  "OPEN_GROUP": "open_group",
  "OPEN_TRACE": "open_trace",
  "TRACE_OPENED": "trace_opened",
  "WINDOW_REQUEST": "window_request",
  "WINDOW": "window",
  "SHOW": "show"
} as const;

export type Kind = (typeof KINDS)[keyof typeof KINDS];
