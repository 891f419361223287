"""``lf.batch(..., engine=lf.engines.Ray())`` on a real local Ray cluster (two CPUs, started
once for the module and stopped after), against fake models and the rate-limited local
OpenAI-wire server. Skip with ``-m "not ray"``."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.batch import BatchProgress
from langfx_nb.eval.report import set_live_view
from langfx_nb.llms import StaticResponse
from langfx_nb.llms.openai import OpenAI

from .limited_server import LimitedServer

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("run_script.py")
RAY_ENV = Path(__file__).with_name("ray_env")


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    # The workers import this module's functions by name: they need the repository root.
    # The cluster's processes start without rfc3987_syntax (ray_env/rfc3987_syntax.py).
    old = os.environ.get("PYTHONPATH")
    paths = [str(ROOT), str(RAY_ENV), *([old] if old else [])]
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
    requests each item sent, counted across worker processes. Every ``slow_every``-th item
    first waits ``slow_s`` (it holds back whatever is sent back with it)."""

    def __init__(self, path: str, slow_every: int = 0, slow_s: float = 0.0) -> None:
        self.path = path
        self.slow_every, self.slow_s = slow_every, slow_s

    async def __call__(self, row: dict[str, int], session: lf.Session) -> Label:
        if self.slow_every and row["id"] % self.slow_every == self.slow_every - 1:
            await asyncio.sleep(self.slow_s)
        answer = await session.query("Label item {{id}}", Label, vars=row, protocol="json")
        with open(self.path, "a") as f:
            f.write(f"{row['id']} {os.getpid()} {time.time()}\n")
        await asyncio.sleep(0.002)
        return Label(item=row["id"], label=answer.label)


def logged(path: Path) -> list[tuple[int, int, float]]:
    rows = [line.split() for line in path.read_text().splitlines() if line]
    return [(int(a), int(b), float(c)) for a, b, c in rows]


async def test_one_request_limit_holds_across_two_workers_on_a_limited_server() -> None:
    # 50 requests a second, counted by the server in 6-second windows; the model is given
    # exactly the server's limit, which the workers share through one limiter actor. The
    # limiter paces at 97 % and may start with a burst of a few requests (its bucket and each
    # worker's first grant): a window must hold more than that 3 % (providers count a
    # minute). The first 2 s of a run hold 30 + 3 × 24 = 102 requests (counted per 0.5 s),
    # so in 2-second windows a run that began at a window's start met a 429 and its wait
    # for the reset: 45.6 req/s in about 1 run of 4, on c598db1 too
    n = 600
    with LimitedServer(requests=300, window_s=6.0) as server:
        lm = wire_model(server, rate_limit=lf.RateLimit(requests_per_minute=50 * 60))
        result = await lf.batch(
            served,
            [{"id": i} for i in range(n)],
            session=lf.Session(lm),
            progress=False,
            max_concurrency=16,
            engine=lf.engines.Ray(num_workers=2),
        )
    assert result.ok, result.errors[:3]
    assert len({r.pid for r in result.results if r is not None}) == 2  # both workers sent
    assert server.duplicates == {} and len(server.answered) == n
    assert server.first_at is not None
    rate = (sum(server.answered.values()) - 1) / (server.last_at - server.first_at)
    # the limit holds (never above it) and is used: each outcome comes back as its item ends,
    # so a worker always holds items waiting, and asks for its next grant before the last
    # is spent (the limiter paces at 97 % of the limit, plus its small burst)
    assert 0.95 <= rate / 50 <= 1.05, rate
    assert len(server.rejected) <= 2, server.rejected  # the limit was kept, not found by 429s


class Pauses:
    """Stands where a batch worker stands for the limiter actor: records what it is told."""

    def __init__(self) -> None:
        self.told: list[tuple[str, float]] = []

    async def pause(self, account: str, seconds: float) -> None:
        self.told.append((account, seconds))

    async def seen(self) -> list[tuple[str, float]]:
        return self.told


class Source:
    def __init__(self, actor: Any) -> None:
        self.limit_handle = actor

    async def limit_actor(self) -> Any:
        return self.limit_handle


async def test_a_429_seen_by_one_worker_pauses_every_worker() -> None:
    from langfx_nb.batch.ray_limiter import LeasedLimiter, LimitActor

    actor = ray.remote(num_cpus=0)(LimitActor).remote()
    other = ray.remote(num_cpus=0)(Pauses).remote()
    try:
        await actor.add_worker.remote(other)
        limit = lf.RateLimit(requests_per_minute=600_000)
        seeing, waiting = LeasedLimiter("acct", Source(actor)), LeasedLimiter("acct", Source(actor))
        for limiter in (seeing, waiting):
            limiter.configure(limit)
        (await seeing.acquire(10)).settle(10)
        seeing.throttle(30.0)  # a 429 asking for 30 s
        told: list[tuple[str, float]] = []
        for _ in range(200):
            told = await other.seen.remote()
            if told:
                break
            await asyncio.sleep(0.02)
        assert told == [("acct", 30.0)]  # every worker is told at once
        assert (await actor.stats.remote("acct"))["throttled"] == 1
        # a worker that was not told (it joined later) is held by the actor itself
        pending = asyncio.ensure_future(waiting.acquire(10))
        await asyncio.sleep(0.3)
        assert not pending.done()
        pending.cancel()
        assert seeing.grants == 1  # one grant asked for, one request sent
    finally:
        ray.kill(actor)
        ray.kill(other)


async def test_a_worker_killed_mid_run_sends_again_only_what_had_just_finished(
    tmp_path: Path,
) -> None:
    # Every 16th item waits 1 s before its request, so items finished beside it would wait
    # for it if outcomes travelled in groups; they must reach the driver as they finish.
    lm = StaticResponse('{"item": 1, "label": "x"}')
    path = tmp_path / "calls.txt"
    path.write_text("")
    manifest = tmp_path / "run.sqlite"
    n = 1500
    killed: list[tuple[int, float]] = []
    finished_before: set[str] = set()

    async def kill_one() -> None:
        while len(logged(path)) < n // 3:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)  # half-way to the next slow items' end
        with sqlite3.connect(manifest) as db:  # what the driver had received
            finished_before.update(
                k for (k,) in db.execute("SELECT key FROM items WHERE status = 'ok'")
            )
        pid = logged(path)[0][1]  # not the last one's: it may have just been sent items
        killed.append((pid, time.time()))
        os.kill(pid, signal.SIGKILL)

    killer = asyncio.ensure_future(kill_one())
    result = await lf.batch(
        Logged(str(path), slow_every=16, slow_s=1.0),
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
    pid, killed_at = killed[0]
    calls = logged(path)
    count = collections.Counter(str(i) for i, _, _ in calls)
    assert [k for k in finished_before if count[k] > 1] == []  # never requested again
    assert all(count[str(i)] >= 1 for i in range(n))
    assert any(p != pid for _, p, _ in calls)
    # what is sent again had finished (its request answered) at most 0.2 s before the kill:
    # older outcomes had reached the driver
    first_done = {str(i): at for i, _, at in reversed(calls)}
    again = {k: round(killed_at - first_done[k], 3) for k, c in count.items() if c > 1}
    assert {k: ago for k, ago in again.items() if ago > 0.2} == {}, again


async def test_a_worker_dead_beyond_max_worker_restarts_stops_the_batch(tmp_path: Path) -> None:
    lm = StaticResponse('{"item": 1, "label": "x"}')
    path = tmp_path / "calls.txt"
    path.write_text("")

    async def kill_one() -> None:
        while not logged(path):
            await asyncio.sleep(0.02)
        os.kill(logged(path)[0][1], signal.SIGKILL)

    killer = asyncio.ensure_future(kill_one())
    with pytest.raises(lf.errors.RayEngineError, match="max_worker_restarts"):
        await lf.batch(
            Logged(str(path), slow_every=4, slow_s=0.2),
            [{"id": i} for i in range(400)],
            session=lf.Session(lm),
            progress=False,
            max_concurrency=4,
            engine=lf.engines.Ray(num_workers=2, max_worker_restarts=0),
        )
    await killer


async def together(row: dict[str, int]) -> int:
    """Every item ends at the same moment; item 0 raises."""
    await asyncio.sleep(row["at"] - time.time())
    if row["id"] == 0:
        raise ValueError("item 0 fails")
    return row["id"]


async def test_on_error_raise_records_every_outcome_that_came_back_with_the_failure(
    tmp_path: Path,
) -> None:
    manifest = tmp_path / "run.sqlite"
    at = time.time() + 3  # after the worker has started and holds all eight items
    with pytest.raises(ValueError, match="item 0 fails"):
        await lf.batch(
            together,
            [{"id": i, "at": at} for i in range(8)],
            run=manifest,
            on_error="raise",
            progress=False,
            max_concurrency=8,
            engine=lf.engines.Ray(num_workers=1),
        )
    # the items that ended with the failure are in the manifest: a resume never sends them
    assert done_in(manifest) == set(range(1, 8))


async def first_fails(row: dict[str, int]) -> int:
    """Item 0 raises once every item has started; the others wait until they are stopped."""
    await asyncio.sleep(row["at"] - time.time())
    if row["id"] == 0:
        raise ValueError("item 0 fails")
    await asyncio.sleep(120)
    return row["id"]


async def test_on_error_raise_counts_the_items_it_stops_in_flight_as_cancelled() -> None:
    snapshots: list[BatchProgress] = []
    at = time.time() + 3  # after the worker has started and holds all four items
    with pytest.raises(ValueError, match="item 0 fails"):
        await lf.batch(
            first_fails,
            [{"id": i, "at": at} for i in range(4)],
            on_error="raise",
            progress=snapshots.append,
            max_concurrency=4,
            engine=lf.engines.Ray(num_workers=1),
        )
    final = snapshots[-1]
    assert final.finished and (final.done, final.running, final.left) == (0, 0, 0)
    assert (final.failed, final.cancelled) == (4, 3)  # item 0 raised, the rest were stopped


def done_in(manifest: Path) -> set[int]:
    if not manifest.exists():
        return set()
    conn = sqlite3.connect(f"{manifest.as_uri()}?mode=ro", uri=True)
    try:
        return {i for (i,) in conn.execute("SELECT idx FROM items WHERE status = 'ok'")}
    except sqlite3.OperationalError:
        return set()
    finally:
        conn.close()


def test_the_driver_killed_mid_run_resumes_with_run_and_sends_nothing_again(
    tmp_path: Path,
) -> None:
    n = 600
    manifest = tmp_path / "crash.sqlite"
    # the batch process joins this module's cluster (a driver of its own, killed with -9)
    env = {**os.environ, "RUN_SCRIPT_RAY": ray.get_runtime_context().gcs_address}
    with LimitedServer(delay_s=0.05) as server:
        args = [sys.executable, str(SCRIPT), server.url, str(manifest), str(n), "8"]
        log = tmp_path / "first.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(args, env=env, stdout=sink, stderr=sink)
        try:
            deadline = time.monotonic() + 120
            while len(done_in(manifest)) < n // 3:
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline
                time.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        assert proc.returncode == -signal.SIGKILL
        done_at_kill = done_in(manifest)
        assert n // 3 <= len(done_at_kill) < n
        resumed = subprocess.run(args, env=env, capture_output=True, text=True, timeout=180)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        out = json.loads(resumed.stdout.splitlines()[-1])
        # no second request for any item the manifest held as done (the server's counts)
        assert [i for i in done_at_kill if server.answered[str(i)] != 1] == []
        assert all(server.answered[str(i)] >= 1 for i in range(n))
        assert out["resumed"] == len(done_at_kill)
        assert out["requests"] == n - len(done_at_kill)
        assert out["statuses"] == ["ok"] * n
        assert out["results"] == [
            ["Label", {"item": str(i), "label": f"label-{i}"}] for i in range(n)
        ]


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


def exact(ctx: lf.eval.EvalContext) -> bool:
    return bool(ctx.output.value == ctx.expected.value)


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

        def stop(self, reason: str) -> None:
            self.shown = reason

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


async def test_a_worker_never_waits_out_a_pause_longer_than_max_delay() -> None:
    # The Ray worker's own limiter obeys the bound the one-process limiter obeys: a day-long
    # 429 pause fails the waiting request unsent, with how long the provider asked for.
    from langfx_nb.batch.ray_limiter import LeasedLimiter
    from langfx_nb.llms.ratelimit import max_wait

    limiter = LeasedLimiter("acct", Source(None))
    limiter.configure(lf.RateLimit(requests_per_minute=600))
    limiter.throttle(86_400.0)
    with pytest.raises(lf.RateLimitError, match="asked to wait 86,4") as caught:
        await asyncio.wait_for(limiter.acquire(1), 5)
    assert caught.value.retry_after is not None and caught.value.retry_after > 86_000
    with max_wait(100_000.0), pytest.raises(TimeoutError):  # a longer bound: it waits
        await asyncio.wait_for(limiter.acquire(1), 0.3)
