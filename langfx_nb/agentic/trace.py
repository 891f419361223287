"""Trace records, the bounded store that keeps them, and their versioned JSON form.

Every session has one tree of ``TraceNode``s: the session root, then actions, queries, tool
calls and logs below the invocation that made them. Nodes hold JSON-able *previews* of
inputs and outputs (long text truncated, secrets redacted, model objects reduced to their
id), never live objects, so a trace can always be saved and shown.

Bounded store: at most ``max_nodes`` nodes keep their details. When a node finishes and the
limit is exceeded, the oldest *finished* nodes are evicted first (with any descendants still
held); running nodes and the root are never evicted. Counters survive eviction: per
kind/status counts, request counts, token usage and cost stay exact, and each parent keeps
``evicted_children`` so a viewer can say how many children it no longer shows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import operator
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, cast, get_args

from ..messages import USAGE_FIELDS as _USAGE_FIELDS
from ..messages import Usage
from .observers import ObserverHub
from .prices import Prices
from .tracebacks import error_info, format_traceback
from .usage import ModelUsage, Price, UsageSummary

__all__ = [
    "MAX_TRACE_NODES",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "Decision",
    "NodeKind",
    "NodeStatus",
    "TraceNode",
    "TraceStore",
    "check_trace_header",
    "saved_nodes",
    "short",
]

#: The nodes a session keeps (its default ``max_trace_nodes``; a saved trace that does not
#: say its own keeps as many, or all it saved when more).
MAX_TRACE_NODES = 10_000

TRACE_FORMAT = "langfx_nb.trace"
TRACE_VERSION = 1

NodeKind = Literal["session", "action", "query", "tool_call", "log", "batch", "item"]
NodeStatus = Literal[
    "running", "waiting", "ok", "failed", "denied", "cancelled", "timed_out", "suspended"
]
Outcome = Literal["approve", "deny", "stop", "error", "suspend", "waiting"]
_KINDS: frozenset[Any] = frozenset(get_args(NodeKind))
_STATUSES: frozenset[Any] = frozenset(get_args(NodeStatus))
_OUTCOMES: frozenset[Any] = frozenset(get_args(Outcome))
#: Statuses a node may still leave: ``finish`` accepts a node only in one of these.
OPEN_STATUSES: frozenset[str] = frozenset({"running", "waiting"})

KINDS: tuple[NodeKind, ...] = ("session", "action", "query", "tool_call", "log", "batch", "item")
STATUSES: tuple[NodeStatus, ...] = (
    "running",
    "waiting",
    "ok",
    "failed",
    "denied",
    "cancelled",
    "timed_out",
    "suspended",
)


#: a ``Usage``'s token counts in ``USAGE_FIELDS`` order, as a tuple
_counts = operator.attrgetter(*_USAGE_FIELDS)


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """What became of a tool call's approval: the one record the core writes on the
    tool-call node (``node.decision``) and every reader (views, OpenTelemetry, ``RunState``)
    reads. ``outcome`` is ``waiting`` while the policy is awaited (``decided_at`` None).

    JSON (``to_json``): ``{outcome, by, asked_at, decided_at}`` plus ``args`` (only when
    approved with edited arguments) and ``note`` (only when present: a Deny's message or the
    reason of a stop, error or suspension). Times are trace seconds.
    """

    outcome: Outcome
    by: str | None = None
    asked_at: float | None = None
    decided_at: float | None = None
    args: Any = None
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "outcome": self.outcome,
            "by": self.by,
            "asked_at": self.asked_at,
            "decided_at": self.decided_at,
        }
        if self.args is not None:
            out["args"] = self.args
        if self.note is not None:
            out["note"] = self.note
        return out

    @classmethod
    def from_json(cls, data: Any) -> Decision:
        """The record from its JSON; ``TypeError``/``ValueError`` naming what is wrong."""
        if not isinstance(data, Mapping):
            raise TypeError(f"'decision' must be an object, got {type(data).__name__}")
        outcome = data.get("outcome")
        if outcome not in _OUTCOMES:
            raise ValueError(f"unknown decision outcome: {short(outcome)}")
        by, note = data.get("by"), data.get("note")
        if by is not None and not isinstance(by, str):
            raise TypeError("decision 'by' must be a string or null")
        if note is not None and not isinstance(note, str):
            raise TypeError("decision 'note' must be a string")
        times = []
        for key in ("asked_at", "decided_at"):
            value = data.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float))
            ):
                raise TypeError(f"decision {key!r} must be a number or null")
            times.append(None if value is None else float(value))
        return cls(cast(Outcome, outcome), by, times[0], times[1], data.get("args"), note)


class TraceNode:
    """One step of a run. Times are seconds since the session started (its clock).

    ``inputs`` and ``outputs`` are JSON-able previews, computed when the node is written;
    ``decision`` is the tool call's ``Decision``. The core writes nodes through
    ``Session.track``; everything else reads them.
    """

    __slots__ = (
        "children_map",
        "cost",
        "decision",
        "end",
        "error",
        "evicted_children",
        "id",
        "inputs",
        "kind",
        "metadata",
        "name",
        "outputs",
        "parent_id",
        "progress",
        "start",
        "status",
        "usage",
    )

    def __init__(
        self,
        id: str,
        parent_id: str | None,
        kind: NodeKind,
        name: str,
        start: float,
        status: NodeStatus = "running",
        end: float | None = None,
        inputs: Any = None,
        outputs: Any = None,
        error: dict[str, str] | None = None,
        usage: Usage | None = None,
        decision: Decision | None = None,
        progress: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        evicted_children: int = 0,
        cost: float | None = None,
    ) -> None:
        self.id = id
        self.parent_id = parent_id
        self.kind = kind
        self.name = name
        self.start = start
        self.status = status
        self.end = end
        self.inputs = inputs
        self.outputs = outputs
        self.error = error
        self.usage = usage
        self.decision = decision
        self.progress = progress
        self.metadata: dict[str, Any] = {} if metadata is None else metadata
        self.children_map: dict[str, TraceNode] = {}
        self.evicted_children = evicted_children
        #: What this node's own model requests cost (a ``query`` node's; ``None`` when none
        #: was priced: unknown, not free). Roll-ups over a subtree are the reader's sums.
        self.cost = cost

    def __repr__(self) -> str:
        return f"TraceNode({self.id}, {self.kind}, {self.name!r}, {self.status})"

    @property
    def children(self) -> tuple[TraceNode, ...]:
        """Children still held by the store, in start order."""
        return tuple(self.children_map.values())

    @property
    def duration(self) -> float | None:
        return None if self.end is None else self.end - self.start

    def walk(self) -> Iterator[TraceNode]:
        """This node and its held descendants, depth first."""
        yield self
        for child in tuple(self.children_map.values()):
            yield from child.walk()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "parent_id": self.parent_id,
            "kind": self.kind,
            "name": self.name,
            "status": self.status,
            "start": self.start,
            "end": self.end,
        }
        if self.inputs is not None:
            out["inputs"] = self.inputs
        if self.outputs is not None:
            out["outputs"] = self.outputs
        if self.error is not None:
            out["error"] = self.error
        if self.decision is not None:
            out["decision"] = self.decision.to_json()
        if self.progress is not None:
            out["progress"] = self.progress
        if self.usage is not None:
            out["usage"] = self.usage.to_json()
        if self.cost is not None:
            out["cost"] = self.cost
        if self.metadata:
            out["metadata"] = self.metadata
        if self.evicted_children:
            out["evicted_children"] = self.evicted_children
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TraceNode:
        """A node from its JSON; ``TypeError``/``KeyError``/``ValueError`` when malformed."""
        kind, status, end = data["kind"], data.get("status", "ok"), data.get("end")
        if kind not in _KINDS or status not in _STATUSES:
            raise ValueError(f"unknown kind or status: {short(kind)}, {short(status)}")
        start = data.get("start", 0.0)
        if isinstance(start, bool) or not isinstance(start, (int, float)):
            raise TypeError("'start' must be a number")
        if end is not None and (isinstance(end, bool) or not isinstance(end, (int, float))):
            raise TypeError("'end' must be a number or null")
        evicted = data.get("evicted_children") or 0
        if isinstance(evicted, bool) or not isinstance(evicted, int):
            raise TypeError("'evicted_children' must be an integer")
        for key in ("usage", "metadata"):
            if data.get(key) is not None and not isinstance(data[key], Mapping):
                raise TypeError(f"{key!r} must be an object")
        parent_id = data.get("parent_id")
        return cls(
            id=str(data["id"]),
            parent_id=None if parent_id is None else str(parent_id),
            kind=kind,
            name=str(data.get("name", "")),
            start=float(start),
            status=status,
            end=end,
            inputs=data.get("inputs"),
            outputs=data.get("outputs"),
            error=data.get("error"),
            usage=_usage(data["usage"]) if data.get("usage") is not None else None,
            decision=None if data.get("decision") is None else Decision.from_json(data["decision"]),
            progress=data.get("progress"),
            metadata=dict(data.get("metadata") or {}),
            evicted_children=evicted,
            cost=_cost(data.get("cost")),
        )


def _cost(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("'cost' must be a number or null")
    return float(value)


class TraceStore:
    """The node tree of one session, bounded, with exact counters and event fan-out."""

    def __init__(
        self,
        *,
        max_nodes: int,
        clock_now: Callable[[], float],
        session_id: str,
        prices: Mapping[str, Price] | None = None,
        hub: ObserverHub | None = None,
    ) -> None:
        if max_nodes < 1:
            raise ValueError("max_trace_nodes must be at least 1")
        self.max_nodes = max_nodes
        self._now = clock_now
        self.t0 = clock_now()
        self.session_id = session_id
        self.prices = Prices.of(prices)
        self.hub = hub or ObserverHub()
        #: Called with ("start" | "end" | "decision" | "log", node) on the caller's thread;
        #: unlike hub observers they get the node itself, so nothing is serialized for them.
        #: The OpenTelemetry export is one; a hook must be quick and must not raise.
        self.node_hooks: list[Callable[[str, TraceNode], None]] = []
        self.nodes: dict[str, TraceNode] = {}
        self._finished: deque[TraceNode] = deque()
        self._next_id = 0
        self._seq = 0
        self._counts: dict[tuple[str, str], int] = {}
        self.started: dict[str, int] = {}
        self.evicted = 0
        self.requests: dict[str, int] = {}
        #: per model: token counts in ``USAGE_FIELDS`` order (``None``: never reported)
        self._tokens: dict[str, list[int | None]] = {}
        self._cost: dict[str, float] = {}  # per model: the priced requests' costs
        self._unpriced: dict[str, int] = {}  # per model: requests whose cost is unknown
        self.root = self._new("session", "session", None)

    # -- time and events -----------------------------------------------------------------
    def time(self) -> float:
        return self._now() - self.t0

    def _emit(self, event: dict[str, Any]) -> None:
        self._seq += 1
        event["seq"] = self._seq
        event["session_id"] = self.session_id
        self.hub.emit(event)

    # -- node lifecycle ------------------------------------------------------------------
    def _new(
        self,
        kind: NodeKind,
        name: str,
        parent: TraceNode | None,
        inputs: Any = None,
        metadata: dict[str, Any] | None = None,
        status: NodeStatus = "running",
    ) -> TraceNode:
        node_id = str(self._next_id)
        self._next_id += 1
        node = TraceNode(
            node_id,
            parent.id if parent is not None else None,
            kind,
            name,
            self._now() - self.t0,
            status,
            None,
            inputs,
            None,
            None,
            None,
            None,
            None,
            metadata,
        )
        self.nodes[node_id] = node
        self.started[kind] = self.started.get(kind, 0) + 1
        if parent is not None:
            parent.children_map[node_id] = node
        return node

    def start(
        self,
        kind: NodeKind,
        name: str,
        parent: TraceNode,
        inputs: Any = None,
        metadata: dict[str, Any] | None = None,
    ) -> TraceNode:
        node = self._new(kind, name, parent, inputs, metadata)
        if self.hub.active:
            self._emit({"type": "node_start", "node": node.to_json()})
        for hook in self.node_hooks:
            hook("start", node)
        return node

    def update(self, node: TraceNode, **changes: Any) -> None:
        """Change fields of a running node (progress, decision, metadata) and tell observers.

        ``delta`` is special: streamed text that is sent to observers but not stored.
        """
        delta = changes.pop("delta", None)
        for key, value in changes.items():
            setattr(node, key, value)
        if self.hub.active:
            payload = {
                k: (v.to_json() if isinstance(v, (Usage, Decision)) else v)
                for k, v in changes.items()
            }
            if delta is not None:
                payload["delta"] = delta
            self._emit({"type": "node_update", "node_id": node.id, "changes": payload})
        if "decision" in changes:
            for hook in self.node_hooks:
                hook("decision", node)

    def finish(
        self,
        node: TraceNode,
        status: NodeStatus,
        *,
        outputs: Any = None,
        error: BaseException | None = None,
    ) -> None:
        """End ``node`` with a terminal ``status`` (a no-op once it has ended)."""
        if node.status not in OPEN_STATUSES:
            return
        node.status = status
        node.end = self._now() - self.t0
        if outputs is not None:
            node.outputs = outputs
        if error is not None:
            node.error = error_info(error)
            if node.kind == "item" and status == "failed":  # where a batch item failed
                node.error["traceback"] = format_traceback(error)
        key = (node.kind, status)
        self._counts[key] = self._counts.get(key, 0) + 1
        if self.hub.active:
            self._emit({"type": "node_end", "node": node.to_json()})
        for hook in self.node_hooks:
            hook("end", node)
        self._finished.append(node)
        if len(self.nodes) > self.max_nodes:
            self._evict()

    def log(self, parent: TraceNode, level: str, message: str, data: Any) -> TraceNode:
        node = self._new("log", level, parent, {"message": message, **data}, None, "ok")
        node.end = node.start
        self._counts["log", "ok"] = self._counts.get(("log", "ok"), 0) + 1
        if self.hub.active:
            self._emit({"type": "log", "node": node.to_json()})
        for hook in self.node_hooks:
            hook("log", node)
        self._finished.append(node)
        if len(self.nodes) > self.max_nodes:
            self._evict()
        return node

    def record_usage(
        self, node: TraceNode, model_id: str, usage: Usage | None, cost: float | None = None
    ) -> None:
        """One model request: counted per model; usage added to the node and the totals;
        ``cost`` (``None``: unknown) added to the node's and the model's."""
        if cost is not None:
            node.cost = cost if node.cost is None else node.cost + cost
        if usage is not None:
            node.usage = usage if node.usage is None else node.usage + usage
        self._count_request(model_id, usage, cost)

    def _count_request(self, model_id: str, usage: Usage | None, cost: float | None) -> None:
        """One request in the per-model totals (requests, cost or unpriced, tokens)."""
        self.requests[model_id] = self.requests.get(model_id, 0) + 1
        if cost is None:
            self._unpriced[model_id] = self._unpriced.get(model_id, 0) + 1
        else:
            self._cost[model_id] = self._cost.get(model_id, 0.0) + cost
        if usage is not None:
            tokens = self._tokens.get(model_id)
            if tokens is None:
                self._tokens[model_id] = list(_counts(usage))
                return
            for i, count in enumerate(_counts(usage)):  # summed in place: one request's work
                if count is not None:
                    tokens[i] = count + (tokens[i] or 0)

    def _restore_cost(self, model_id: str, saved: Any, usage: Usage) -> None:
        """A loaded trace's cost of one model: as saved, else from the table (summed
        usage), else unknown (each of its requests unpriced)."""
        cost = _cost(saved)
        if cost is None:
            price = self.prices.find(model_id)
            cost = None if price is None else price.cost(usage)
        if cost is None:
            self._unpriced[model_id] = max(1, self.requests.get(model_id, 0))
        else:
            self._cost[model_id] = cost

    @property
    def usage_by_model(self) -> dict[str, Usage]:
        return {model_id: Usage(*tokens) for model_id, tokens in self._tokens.items()}

    @property
    def counts(self) -> dict[str, dict[str, int]]:
        """Finished nodes per kind and status, evicted ones included."""
        out: dict[str, dict[str, int]] = {}
        for (kind, status), n in self._counts.items():
            out.setdefault(kind, {})[status] = n
        return out

    def adopt(
        self,
        parent: TraceNode,
        nodes: Sequence[Mapping[str, Any]],
        requests: Sequence[tuple[str, Usage | None, float | None]] = (),
    ) -> TraceNode:
        """Add a finished subtree recorded by another session (a Ray worker's item) under
        ``parent``: ``nodes`` are its ``TraceNode.to_json()`` forms, its top first, read by
        ``TraceNode.from_json`` (malformed: one ``ValueError`` naming the node). The nodes
        get new ids, their times are moved so that the top ends now, they are counted and
        told to observers as if recorded here, and ``requests`` (model id, usage, cost of
        each model request made under them) are added to the session's totals. The top
        node, as held here."""
        if not nodes:
            raise ValueError("adopt: no nodes")
        parsed: list[TraceNode] = []
        for i, raw in enumerate(nodes):
            with _reading(f"adopted nodes[{i}]"):
                parsed.append(TraceNode.from_json(_object(raw, required=True)))
        top = parsed[0]
        shift = self.time() - (top.end if top.end is not None else top.start)
        ids: dict[str, str] = {}
        for node in parsed:
            old = node.id
            node.id = ids[old] = str(self._next_id)
            self._next_id += 1
            node.parent_id = parent.id if node is top else ids.get(node.parent_id or "", parent.id)
            node.start += shift
            if node.end is not None:
                node.end += shift
            self.nodes[node.id] = node
            holder = parent if node is top else self.nodes.get(node.parent_id, parent)
            holder.children_map[node.id] = node
            self.started[node.kind] = self.started.get(node.kind, 0) + 1
            if self.hub.active:
                self._emit({"type": "node_start", "node": node.to_json()})
            for hook in self.node_hooks:
                hook("start", node)
        for node in reversed(parsed):  # children end before their parents
            if node.status in OPEN_STATUSES:
                continue
            key = (node.kind, node.status)
            self._counts[key] = self._counts.get(key, 0) + 1
            if self.hub.active:
                self._emit({"type": "node_end", "node": node.to_json()})
            for hook in self.node_hooks:
                hook("end", node)
            self._finished.append(node)
        for model_id, usage, cost in requests:
            self._count_request(model_id, usage, cost)
        if len(self.nodes) > self.max_nodes:
            self._evict()
        return top

    # -- eviction ------------------------------------------------------------------------
    def _evict(self) -> None:
        nodes, finished, limit = self.nodes, self._finished, self.max_nodes
        while len(nodes) > limit and finished:
            node = finished.popleft()
            if node.id not in nodes:
                continue  # already gone with an evicted ancestor
            parent = nodes.get(node.parent_id) if node.parent_id is not None else None
            if parent is not None:
                parent.children_map.pop(node.id, None)
                parent.evicted_children += 1
            if not node.children_map:
                del nodes[node.id]
                self.evicted += 1
                continue
            for gone in node.walk():
                if nodes.pop(gone.id, None) is not None:
                    self.evicted += 1

    # -- queries over the held nodes -----------------------------------------------------
    def of_kind(self, kind: NodeKind) -> list[TraceNode]:
        return [n for n in self.nodes.values() if n.kind == kind]

    def usage_summary(self) -> UsageSummary:
        by_model: dict[str, ModelUsage] = {}
        total = Usage()
        cost: float | None = None
        unpriced: list[str] = []
        usage_by_model = self.usage_by_model
        for model_id, requests in self.requests.items():
            usage = usage_by_model.get(model_id, Usage())
            total = total + usage
            model_cost = self._cost.get(model_id)
            if self._unpriced.get(model_id):
                unpriced.append(model_id)
            if model_cost is not None:
                cost = (cost or 0.0) + model_cost
            by_model[model_id] = ModelUsage(requests, usage, model_cost)
        counts = self.counts
        for kind, n in self.started.items():
            finished = sum(counts.get(kind, {}).values())
            if n > finished:
                counts.setdefault(kind, {})["running"] = n - finished
        return UsageSummary(
            requests=sum(self.requests.values()),
            usage=total,
            cost=cost,
            by_model=by_model,
            unpriced_models=tuple(unpriced),
            counts=counts,
            evicted_nodes=self.evicted,
            unpriced_requests=sum(self._unpriced.values()),
        )

    # -- JSON ----------------------------------------------------------------------------
    def to_json(self, session: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "format": TRACE_FORMAT,
            "version": TRACE_VERSION,
            "session": dict(session),
            "summary": self.usage_summary().to_json(),
            "counts": {"started": dict(self.started), "finished": self.counts},
            "nodes": [n.to_json() for n in self.nodes.values()],
        }

    @classmethod
    def from_json(
        cls,
        data: Mapping[str, Any],
        prices: Mapping[str, Price] | None = None,
        *,
        clock_now: Callable[[], float] | None = None,
        hub: ObserverHub | None = None,
        live: bool = False,
    ) -> TraceStore:
        """Rebuild a saved trace: the one reader of the trace format (``Session.load_trace``
        and resume both use it). Anything malformed is one ``ValueError`` whose message
        names the part of the file that is wrong (``nodes[3]: 'kind' is missing``).

        ``live=True`` makes a store that continues the saved run on ``clock_now``: new
        nodes are numbered after the saved ones and timed after the last saved time, the
        saved finished nodes are the oldest in line for eviction, and a root that had ended
        is running again (its count moved back)."""
        nodes = saved_nodes(data)
        with _reading("session"):
            session = _object(data.get("session"))
            limit = int(session.get("max_trace_nodes", MAX_TRACE_NODES))
            store = cls(
                max_nodes=max(1, limit, len(nodes)),
                clock_now=clock_now or (lambda: 0.0),
                session_id=str(session.get("id", "")),
                prices=prices,
                hub=hub,
            )
        store.nodes.clear()
        orphans = False  # a node whose parent is not (yet) read: a cycle may be among them
        for i, raw in enumerate(nodes):
            with _reading(f"nodes[{i}]"):
                node = TraceNode.from_json(_object(raw, required=True))
                if node.id in store.nodes:
                    raise ValueError(f"the id {short(node.id)} is used twice")
                if node.parent_id == node.id:
                    raise ValueError("the node is its own parent")
            store.nodes[node.id] = node
            parent = store.nodes.get(node.parent_id) if node.parent_id is not None else None
            if parent is not None:
                parent.children_map[node.id] = node
            else:
                orphans = orphans or node.parent_id is not None
        if orphans:
            _check_no_cycle(store.nodes)
        roots = [n for n in store.nodes.values() if n.kind == "session"]
        if not roots:
            raise ValueError("malformed trace: it has no session root node")
        store.root = roots[0]
        with _reading("summary"):
            summary = _object(data.get("summary"))
            for model_id, entry in _object(summary.get("by_model")).items():
                entry = _object(entry, required=True)
                store.requests[str(model_id)] = int(entry.get("requests", 0))
                usage = _usage(_object(entry.get("usage")))
                store._tokens[str(model_id)] = list(_counts(usage))
                store._restore_cost(str(model_id), entry.get("cost"), usage)
            store.evicted = int(summary.get("evicted_nodes", 0))
        with _reading("counts"):
            counts = _object(data.get("counts"))
            store.started = {str(k): int(v) for k, v in _object(counts.get("started")).items()}
            store._counts = {
                (str(kind), str(status)): int(n)
                for kind, by_status in _object(counts.get("finished")).items()
                for status, n in _object(by_status, required=True).items()
            }
        store._next_id = 1 + max((int(i) for i in store.nodes if i.isdigit()), default=0)
        if live:
            root = store.root
            store._finished.extend(
                n for n in store.nodes.values() if n.status not in OPEN_STATUSES and n is not root
            )
            last = max(n.end if n.end is not None else n.start for n in store.nodes.values())
            store.t0 = store._now() - last
            if root.status not in OPEN_STATUSES:  # the saved session had ended: running again
                key = ("session", root.status)
                if store._counts.get(key):
                    store._counts[key] -= 1
                root.status, root.end = "running", None
        return store


def _check_no_cycle(nodes: Mapping[str, TraceNode]) -> None:
    """``ValueError`` when following parents from some node comes back to it (such nodes
    are under no root: a tree would leave them out). Each node is followed once."""
    done: set[str] = set()
    for node in nodes.values():
        path: set[str] = set()
        at: TraceNode | None = node
        while at is not None and at.id not in done:
            if at.id in path:
                raise ValueError("malformed trace: some nodes' parents form a cycle")
            path.add(at.id)
            at = None if at.parent_id is None else nodes.get(at.parent_id)
        done |= path


@contextlib.contextmanager
def _reading(where: str) -> Iterator[None]:
    """Turn what a malformed part of a saved trace raises into one clear ``ValueError``."""
    try:
        yield
    except KeyError as exc:
        raise ValueError(f"malformed trace: {where}: {exc.args[0]!r} is missing") from exc
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        message = str(exc)
        if len(message) > 200:
            message = message[:199] + "…"
        raise ValueError(f"malformed trace: {where}: {message}") from exc


def _object(value: Any, *, required: bool = False) -> Mapping[str, Any]:
    """A JSON object of a saved trace (absent/null is an empty one unless ``required``)."""
    if value is None and not required:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return value


def _usage(data: Mapping[str, Any]) -> Usage:
    """Token counts of a saved trace: each an integer or absent."""
    for f in _USAGE_FIELDS:
        value = data.get(f)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"usage {f} must be an integer")
    return Usage.from_json(data)


def saved_nodes(data: Any) -> list[Any]:
    """The node list of a saved trace's data, after the checks every reader of a saved trace
    makes first: ``ValueError`` naming what is wrong (not a langfx_nb trace, an unsupported
    version, ``nodes`` not a list)."""
    if not isinstance(data, Mapping):
        raise ValueError(f"not a langfx_nb trace: a {type(data).__name__}, not an object")
    check_trace_header(data)
    nodes = data.get("nodes")
    if not isinstance(nodes, list):
        raise ValueError("malformed trace: 'nodes' must be a list")
    return nodes


def check_trace_header(header: Mapping[str, Any], *, whole: bool = True) -> None:
    """``ValueError`` when a saved trace's header names another format or version.
    ``whole=False``: a header read only in part so far (a file read as a stream), where a
    missing ``format`` or ``version`` may still come."""
    if ("format" in header or whole) and header.get("format") != TRACE_FORMAT:
        raise ValueError("not a langfx_nb trace")
    if ("version" in header or whole) and header.get("version") != TRACE_VERSION:
        raise ValueError(f"unsupported trace version: {short(header.get('version'))}")


def short(value: Any) -> str:
    """``value``'s repr, cut to 60 characters (a value from a file, named in a message)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"
