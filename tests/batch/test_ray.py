"""``lf.batch(..., engine=lf.engines.Ray())`` on a real local Ray cluster (two CPUs, started
once for the module and stopped after), against fake models and the rate-limited local
OpenAI-wire server. Skip with ``-m "not ray"``."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.eval.report import set_live_view
from langfx_nb.llms import StaticResponse
from langfx_nb.llms.openai import OpenAI

from .limited_server import LimitedServer

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # The workers import this module's functions by name: they need the repository root.
    # Every Ray process imports jsonschema, which imports rfc3987_syntax when installed
    # (jupyter-events brings it): ~3 s of grammar building per process, which on a loaded
    # 2-core machine made the cluster miss its own startup timeout. Ray never checks IRIs,
    # so the cluster's processes get a stand-in that refuses to import (docs/decisions.md).
    stub = tmp_path_factory.mktemp("no_rfc3987") / "rfc3987_syntax"
    stub.mkdir()
    (stub / "__init__.py").write_text('raise ImportError("not for Ray processes in tests")\n')
    old = os.environ.get("PYTHONPATH")
    paths = [str(ROOT), str(stub.parent), *([old] if old else [])]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


class Label(pydantic.BaseModel):
    item: int
    label: str


class Answer(pydantic.BaseModel):
    item: str
    label: str


class Served(pydantic.BaseModel):
    item: str
    label: str
    pid: int


async def label(row: dict[str, int], session: lf.Session) -> Label:
    if row["id"] % 997 == 5:
        raise ValueError(f"no label for {row['id']}")
    answer = await session.query("Label item {{id}}", Label, vars=row, protocol="json")
    return Label(item=row["id"], label=f"{answer.label}-{row['id']}")


async def served(row: dict[str, int], session: lf.Session) -> Served:
    answer = await session.query("Label this: item={{id}}", Answer, vars=row, protocol="json")
    return Served(item=answer.item, label=answer.label, pid=os.getpid())


class PidServed:
    """``served`` that also writes the worker's pid to a file on its first item."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    async def __call__(self, row: dict[str, int], session: lf.Session) -> Served:
        mark = Path(self.folder) / str(os.getpid())
        if not mark.exists():
            mark.write_text("")
        return await served(row, session)


def wire_model(server: LimitedServer, **kw: Any) -> OpenAI:
    return OpenAI(
        "gpt-test", api_key="sk-test", base_url=server.url, max_tokens=12, max_attempts=5, **kw
    )


async def test_results_match_the_asyncio_engine_on_10000_items() -> None:
    lm = StaticResponse('{"item": 1, "label": "x"}')
    rows = [{"id": i} for i in range(10_000)]
    local = await lf.batch(label, rows, session=lf.Session(lm), progress=False)
    spread = await lf.batch(
        label, rows, session=lf.Session(lm), progress=False, engine=lf.engines.Ray()
    )
    assert spread.results == local.results
    assert spread.statuses == local.statuses
    assert spread.errors == local.errors
    assert spread.totals.requests == local.totals.requests == 10_000 - 11
    assert spread.totals.usage == local.totals.usage
    assert (spread.totals.ok, spread.totals.failed) == (local.totals.ok, local.totals.failed)
    # the driver holds the trace: one item node per item, its query node under it
    a, b = local.session.usage_summary, spread.session.usage_summary
    assert (b.requests, b.counts) == (a.requests, a.counts)
    item = spread.session.find(spread.node_ids[9_999] or "")
    assert item is not None and item.parent_id == spread.batch_node_id
    assert item.name == "item 9999" and item.inputs == {"id": 9_999}
    assert [c.kind for c in item.children] == ["query"]
    assert (
        item.children[0].usage == local.session.find(local.node_ids[9_999] or "").children[0].usage
    )  # type: ignore[union-attr]


class Logged:
    """Answers with the fake model and appends ``id pid time`` to a file per call: the
    requests each item sent, counted across worker processes."""

    def __init__(self, path: str) -> None:
        self.path = path

    async def __call__(self, row: dict[str, int], session: lf.Session) -> Label:
        answer = await session.query("Label item {{id}}", Label, vars=row, protocol="json")
        with open(self.path, "a") as f:
            f.write(f"{row['id']} {os.getpid()} {time.time()}\n")
        await asyncio.sleep(0.002)
        return Label(item=row["id"], label=answer.label)


def logged(path: Path) -> list[tuple[int, int, float]]:
    rows = [line.split() for line in path.read_text().splitlines() if line]
    return [(int(a), int(b), float(c)) for a, b, c in rows]


async def test_a_request_limit_holds_across_two_workers(tmp_path: Path) -> None:
    rpm = 100 * 60  # 100 requests a second for the whole cluster
    lm = StaticResponse(
        '{"item": 1, "label": "x"}', rate_limit=lf.RateLimit(requests_per_minute=rpm)
    )
    path = tmp_path / "calls.txt"
    result = await lf.batch(
        Logged(str(path)),
        [{"id": i} for i in range(600)],
        session=lf.Session(lm),
        progress=False,
        max_concurrency=16,
        engine=lf.engines.Ray(num_workers=2),
    )
    assert result.ok, result.errors[:3]
    calls = logged(path)
    assert len({pid for _, pid, _ in calls}) == 2  # both workers sent requests
    times = sorted(t for _, _, t in calls)
    rate = (len(times) - 1) / (times[-1] - times[0])
    assert 0.95 <= rate / (rpm / 60) <= 1.05, rate


async def test_a_worker_killed_mid_run_sends_no_request_again_for_finished_items(
    tmp_path: Path,
) -> None:
    lm = StaticResponse('{"item": 1, "label": "x"}')
    path = tmp_path / "calls.txt"
    path.write_text("")
    manifest = tmp_path / "run.sqlite"
    n = 3000
    killed: list[int] = []
    finished_before: set[str] = set()

    async def kill_one() -> None:
        while len(logged(path)) < n // 3:
            await asyncio.sleep(0.02)
        with sqlite3.connect(manifest) as db:  # what the driver had received
            finished_before.update(
                k for (k,) in db.execute("SELECT key FROM items WHERE status = 'ok'")
            )
        pid = logged(path)[-1][1]
        killed.append(pid)
        os.kill(pid, signal.SIGKILL)

    killer = asyncio.ensure_future(kill_one())
    result = await lf.batch(
        Logged(str(path)),
        [{"id": i} for i in range(n)],
        session=lf.Session(lm),
        run=manifest,
        key=lambda row: str(row["id"]),
        progress=False,
        max_concurrency=8,
        engine=lf.engines.Ray(num_workers=2),
    )
    await killer
    assert result.ok and result.totals.ok == n
    assert killed and finished_before
    calls = collections.Counter(str(i) for i, _, _ in logged(path))
    assert [k for k in finished_before if calls[k] > 1] == []  # never requested again
    assert all(calls[str(i)] >= 1 for i in range(n))
    assert any(pid != killed[0] for _, pid, _ in logged(path))


async def test_an_unpicklable_fn_or_item_fails_before_any_request() -> None:
    with LimitedServer() as server:
        lm = wire_model(server)
        lock = threading.Lock()

        async def locked(row: dict[str, int], session: lf.Session) -> Served:
            with lock:
                pass
            return await served(row, session)

        with pytest.raises(lf.errors.ShippingError, match="fn cannot be sent") as caught:
            await lf.batch(locked, [{"id": 1}], session=lf.Session(lm), engine=lf.engines.Ray())
        assert isinstance(caught.value, TypeError)
        with pytest.raises(lf.errors.ShippingError, match="item 1 cannot be sent"):
            await lf.batch(
                served,
                [{"id": 0}, {"id": 1, "lock": lock}],  # type: ignore[dict-item]
                session=lf.Session(lm),
                key=lambda row: str(row["id"]),
                engine=lf.engines.Ray(),
            )
        assert server.requests_seen == 0


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Ray Data's own settings
async def test_a_ray_dataset_is_read_as_items() -> None:
    import ray.data

    pytest.importorskip("pyarrow")
    lm = StaticResponse('{"item": 1, "label": "x"}')
    rows = [{"id": i} for i in range(40)]
    dataset = ray.data.from_items(rows)
    spread = await lf.batch(
        label, dataset, session=lf.Session(lm), progress=False, engine=lf.engines.Ray()
    )
    local = await lf.batch(label, rows, session=lf.Session(lm), progress=False)
    assert spread.results == local.results


class Doubled(pydantic.BaseModel):
    value: int


async def double(x: int) -> Doubled:
    return Doubled(value=x * 2 + (1 if x % 5 == 0 else 0))


def exact(case: Any, output: Doubled) -> bool:
    return bool(output.value == case.expected.value)


async def test_an_eval_run_reports_the_same_on_ray() -> None:
    data = lf.eval.Dataset(
        [lf.eval.Case(i, expected=Doubled(value=i * 2), id=f"c{i}") for i in range(30)],
        output_type=Doubled,
    )
    local = await lf.eval.run(double, data, [exact], progress=False)

    class View:  # a notebook's live view: it stays in this process (it cannot be pickled)
        def __init__(self) -> None:
            self.lock, self.added, self.shown = threading.Lock(), 0, None

        def add(self, index: int, result: Any) -> None:
            self.added += 1

        def show(self, source: Any) -> None:
            self.shown = source

    views: list[View] = []
    previous = set_live_view(lambda name, trials: views.append(View()) or views[-1])
    try:
        spread = await lf.eval.run(double, data, [exact], progress=False, engine=lf.engines.Ray())
    finally:
        set_live_view(previous)
    assert views[0].shown is spread and views[0].added == 0  # the finished report, at the end
    assert spread.summary() == local.summary()
    assert [r.output for r in spread.results] == [r.output for r in local.results]
    assert [r.scores for r in spread.results] == [r.scores for r in local.results]
