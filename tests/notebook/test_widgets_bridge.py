"""The bridge batches events (≤ 1 message per interval), flushes at the end, keeps state."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from langfx_nb.notebook.bridge import EventBridge, MessageKind, to_jsonable

from ._fakes import FakeClock


class ListReducer:
    def __init__(self) -> None:
        self.items: list[Any] = []

    def apply(self, event: Any) -> list[dict[str, Any]]:
        self.items.append(event["n"])
        return [{"op": "n", "n": event["n"]}]

    def snapshot(self) -> dict[str, Any]:
        return {"items": list(self.items)}


def make(clock: FakeClock | None = None, interval: float = 0.05):
    sent: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    bridge = EventBridge(
        sent.append, ListReducer(), on_state=states.append, interval=interval, clock=clock
    )
    return bridge, sent, states


def events_of(sent: list[dict[str, Any]]) -> list[int]:
    return [e["n"] for m in sent if m["kind"] == "events" for e in m["events"]]


def test_a_burst_of_events_becomes_one_message_per_window() -> None:
    clock = FakeClock()
    bridge, sent, _ = make(clock)
    for n in range(1000):
        bridge.push({"n": n})
    assert sent == []  # nothing is sent synchronously inside the burst
    clock.advance(0)
    assert len(sent) == 1 and events_of(sent) == list(range(1000))


def test_steady_stream_is_throttled_to_the_interval_without_loss() -> None:
    clock = FakeClock()
    bridge, sent, _ = make(clock)
    # 2,000 events/s for 2 s: one event every 0.5 ms
    for n in range(4000):
        bridge.push({"n": n})
        clock.advance(0.0005)
    clock.advance(1)
    assert events_of(sent) == list(range(4000))
    assert len(sent) <= 2 / 0.05 + 2
    sends = [m["seq"] for m in sent]
    assert sends == list(range(1, len(sent) + 1))


def test_flush_sends_pending_now_and_publishes_state() -> None:
    clock = FakeClock()
    bridge, sent, states = make(clock)
    bridge.push({"n": 1})
    clock.advance(0)
    bridge.push({"n": 2})  # inside the window: waits
    assert events_of(sent) == [1]
    bridge.flush()
    assert events_of(sent) == [1, 2]
    assert states[-1] == {"items": [1, 2], "seq": 2}
    clock.advance(1)
    assert len(sent) == 2  # the cancelled timer does not send again


def test_state_trait_is_throttled_but_final_state_is_exact() -> None:
    clock = FakeClock()
    bridge, _sent, states = make(clock)
    for n in range(300):  # 3 s of events, one per 10 ms
        bridge.push({"n": n})
        clock.advance(0.01)
    assert 1 <= len(states) <= 3
    bridge.flush()
    assert states[-1]["items"] == list(range(300))


def test_snapshot_message_covers_exactly_the_sent_batches() -> None:
    clock = FakeClock()
    bridge, sent, _ = make(clock)
    bridge.push({"n": 1})
    bridge.push({"n": 2})
    snap = bridge.snapshot_message()
    assert snap["kind"] == MessageKind.SNAPSHOT
    assert snap["state"] == {"items": [1, 2]}
    assert snap["seq"] == sent[-1]["seq"]  # pending events were sent first, under that seq


async def test_uses_the_running_loop_and_sends_the_tail_after_the_window() -> None:
    bridge, sent, _ = make(interval=0.01)
    for n in range(50):
        bridge.push({"n": n})
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert events_of(sent) == list(range(50))
    bridge.push({"n": 50})
    bridge.flush()
    assert events_of(sent) == list(range(51))
    assert len(sent) == 2


async def test_push_from_another_thread_hops_onto_the_loop() -> None:
    bridge, sent, _ = make(interval=0.0)
    bridge.push({"n": 0})  # binds the loop
    seen: list[int] = []

    def worker() -> None:
        seen.append(threading.get_ident())
        bridge.push({"n": 1})

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    for _ in range(5):
        await asyncio.sleep(0)
    bridge.flush()
    assert events_of(sent) == [0, 1]


def test_without_any_loop_events_are_sent_at_once() -> None:
    bridge, sent, _ = make()
    bridge.push({"n": 7})
    assert events_of(sent) == [7]


def test_to_jsonable_handles_core_shapes() -> None:
    from dataclasses import dataclass

    @dataclass
    class P:
        path: tuple[Any, ...]

    assert to_jsonable(P(("a", 0))) == {"path": ["a", 0]}
    assert to_jsonable({"e": ValueError("bad")}) == {"e": {"type": "ValueError", "message": "bad"}}
    assert to_jsonable(float("nan")) == "nan"  # JSON has no NaN; its repr stays readable
    assert to_jsonable({1: {2}}) == {"1": [2]}
