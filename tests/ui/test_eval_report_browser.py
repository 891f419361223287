"""The evaluation report widget in a real JupyterLab + chromium: 10,000 rows drawn as a
window, sorting by a metric, filtering, a click opening the trial's trace in the explorer,
and the compare view; screenshots of a realistic report (a failing trial's trace open) and
comparison in the light and dark themes go to ``artifacts/ui/`` (``LANGFX_NB_DOC_IMAGES=1``
also refreshes ``docs/images/eval_*.png``)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from .conftest import Lab
from .test_widgets_browser import run_all_nowait, write_notebook
from .test_widgets_look_browser import set_theme, shoot

pytestmark = [pytest.mark.browser, pytest.mark.timeout(400)]

CELLS = [
    """
    import asyncio
    import langfx_nb as lf
    %load_ext langfx_nb
    session = lf.Session(max_trace_nodes=100_000)
    cases = [lf.eval.Case(f"q{i}", expected=f"q{i}", id=f"c{i}", metadata={"group": f"g{i % 4}"})
             for i in range(10_000)]
    async def task(x):
        await asyncio.sleep(0)  # a real task waits for I/O: the loop (and the view) get turns
        return "wrong" if int(x[1:]) % 7 == 0 else x
    def length(ctx):
        return min(1.0, len(ctx.output) / 2)
    report = await lf.eval.run(task, cases, [lf.eval.exact, length], session=session,
                               progress=False, name="ten thousand")  # shown live
    print(len(report))
    """,
    """
    async def better(x):
        return "wrong" if int(x[1:]) % 11 == 0 else x
    candidate = await lf.eval.run(better, cases[:300], [lf.eval.exact, length], progress=False,
                                  name="candidate", live=False)
    lf.eval.compare(lf.eval.Report(report.results[:300], name="baseline"), candidate)
    """,
]


def _first_row_cells(lab: Lab, nth: int = 0) -> list[str]:
    cells: list[str] = lab.page.evaluate(
        """(n) => {
            const view = document.querySelectorAll('.lfx-er')[n];
            const rows = [...view.querySelectorAll('.lfx-er-row')]
                .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top));
            return rows.length ? [...rows[0].children].map(c => c.textContent) : [];
        }""",
        nth,
    )
    return cells


def test_ten_thousand_rows_sort_filter_and_a_click_opens_the_trace(lab: Lab) -> None:
    lab.open(write_notebook(lab, "w_eval.ipynb", CELLS))
    page = lab.page
    page.evaluate(
        """() => {  // what the live report's head said while the run went on
            window.__lfxHeads = [];
            const obs = new MutationObserver(() => {
                const head = document.querySelector('.lfx-er .lfx-er-head .lfx-muted');
                const text = head ? head.textContent : '';
                const seen = window.__lfxHeads;
                if (text && (!seen.length || seen[seen.length - 1][1] !== text))
                    seen.push([performance.now(), text]);
            });
            obs.observe(document.body, {subtree: true, childList: true, characterData: true});
        }"""
    )
    run_all_nowait(lab)
    lab.wait_cells_done(180_000)
    heads: list[list[Any]] = page.evaluate("() => window.__lfxHeads")
    live = [text for _, text in heads if "running" in text]
    # the report filled in while the run went on: part of the trials, then all of them
    assert any(" of 10000 trials" in t and not t.startswith("10000 of") for t in live), heads
    assert "10000 trials" in heads[-1][1] and "running" not in heads[-1][1]
    if len(live) > 1:
        span_s = (heads[len(live) - 1][0] - heads[0][0]) / 1000
        print(f"live report: {len(live)} updates over {span_s:.1f} s")
    report = page.locator(".lfx-er").first
    report.wait_for(timeout=30_000)
    page.wait_for_function(
        "() => (document.querySelector('.lfx-er .lfx-er-count')||{}).textContent === '10000 rows'"
    )
    drawn = page.locator(".lfx-er").first.locator(".lfx-er-row").count()
    assert 0 < drawn < 100  # only the rows on screen (and a few more) exist in the page
    assert "exact" in report.locator(".lfx-er-metrics").inner_text()
    assert "%" in report.locator(".lfx-er-metrics").inner_text()

    # sort by the exact metric: descending first (passes), again for ascending (fails first)
    header = report.locator('.lfx-er-th [data-col="score:exact"]')
    started = time.perf_counter()
    header.click()
    page.wait_for_function(
        "() => document.querySelector('.lfx-er [data-col=\"score:exact\"]')"
        ".classList.contains('lfx-er-sorted')"
    )
    sort_ms = (time.perf_counter() - started) * 1000
    assert _first_row_cells(lab)[2] == "pass"
    header.click()
    page.wait_for_function(
        "() => document.querySelector('.lfx-er [data-col=\"score:exact\"]')"
        ".classList.contains('lfx-er-asc')"
    )
    first = _first_row_cells(lab)
    assert first[2] == "fail" and first[0] == "c0#0"

    # filter: every word must match
    box = report.locator(".lfx-er-bar input[type=search]")
    box.fill("c777")
    page.wait_for_function(
        "() => document.querySelector('.lfx-er .lfx-er-count').textContent.startsWith('11 of')"
    )
    keys = page.evaluate(
        "() => [...document.querySelector('.lfx-er').querySelectorAll('.lfx-er-row')]"
        ".map(r => r.dataset.key)"
    )
    assert keys and all(k.startswith("c777") for k in keys)
    box.fill("")

    # failing only
    report.locator("label:has-text('failing only') input").check()
    page.wait_for_function(
        "() => document.querySelector('.lfx-er .lfx-er-count').textContent.startsWith('1429 of')"
    )
    report.locator("label:has-text('failing only') input").uncheck()

    # a click on a row opens that trial's trace in the explorer below
    box.fill("c70#0")
    row = report.locator('.lfx-er-row[data-key="c70#0"]')
    row.wait_for()
    page.evaluate(
        """() => {  // in-page timing: the click, and when the explorer shows the trial selected
            window.__lfxClick = null; window.__lfxShown = null;
            document.addEventListener('click', () => { window.__lfxClick = performance.now(); },
                                      {capture: true, once: true});
            const obs = new MutationObserver(() => {
                if (document.querySelector('.lfx-te .lfx-te-row.lfx-sel')) {
                    window.__lfxShown = performance.now(); obs.disconnect();
                }
            });
            obs.observe(document.body, {subtree: true, childList: true, attributes: true});
        }"""
    )
    started = time.perf_counter()
    row.click()
    explorer = page.locator(".lfx-te").first
    explorer.wait_for(timeout=30_000)
    page.wait_for_function(
        "() => !!document.querySelector('.lfx-te .lfx-te-row.lfx-sel')", timeout=30_000
    )
    open_ms = (time.perf_counter() - started) * 1000
    in_page_ms = page.evaluate("() => window.__lfxShown - window.__lfxClick")
    selected = page.locator(".lfx-te .lfx-te-row.lfx-sel").first.inner_text()
    tree = page.locator(".lfx-te").first.inner_text()
    assert "task" in tree and "evaluate" in tree
    detail = report.locator(".lfx-er-detail").inner_text()
    assert "wrong" in detail  # case 70 answers wrong: its output is shown, as text
    assert "c70#0" in selected  # the trial's one name: the row's key is the trace node's

    # a second click reuses the report's one explorer: no new widget, the other trial shown
    explorers = page.locator(".lfx-te").count()
    box.fill("c71#0")
    report.locator('.lfx-er-row[data-key="c71#0"]').click()
    page.wait_for_function(
        "() => (document.querySelector('.lfx-te .lfx-te-row.lfx-sel')||{innerText: ''})"
        ".innerText.includes('c71#0')",
        timeout=30_000,
    )
    assert page.locator(".lfx-te").count() == explorers
    assert "c70#0" not in page.locator(".lfx-te").first.inner_text()
    print(
        f"sort of 10,000 rows: {sort_ms:.0f} ms; click to trace shown: {open_ms:.0f} ms "
        f"(in the page: {in_page_ms:.0f} ms)"
    )

    # the compare view: changed cases highlighted, regressions first
    compare = page.locator(".lfx-er").nth(1)
    compare.wait_for()
    first = _first_row_cells(lab, 1)
    assert first[1] == "regressed"
    assert compare.locator(".lfx-er-row.lfx-er-regressed").count() > 0
    assert "noise" in compare.locator(".lfx-er-metrics").inner_text()


SHOT_CELLS = [
    """
    import langfx_nb as lf
    %load_ext langfx_nb
    from pydantic import BaseModel
    CAPITALS = {
        "France": "Paris", "Italy": "Rome", "Japan": "Tokyo", "Australia": "Canberra",
        "Canada": "Ottawa", "Brazil": "Brasília", "Turkey": "Ankara", "Switzerland": "Bern",
        "Nigeria": "Abuja", "Morocco": "Rabat", "Vietnam": "Hanoi", "New Zealand": "Wellington",
        "South Africa": "Pretoria", "India": "New Delhi", "Kenya": "Nairobi", "Chile": "Santiago",
        "Peru": "Lima", "Egypt": "Cairo", "Spain": "Madrid", "Norway": "Oslo", "Poland": "Warsaw",
        "Germany": "Berlin", "Mexico": "Mexico City", "Ghana": "Accra", "Bolivia": "Sucre",
        "Tanzania": "Dodoma", "Myanmar": "Naypyidaw", "Sri Lanka": "Colombo", "Ecuador": "Quito",
        "Portugal": "Lisbon", "Greece": "Athens", "Ireland": "Dublin", "Israel": "Jerusalem",
        "Pakistan": "Islamabad", "Kazakhstan": "Astana", "Belize": "Belmopan",
        "Ivory Coast": "Yamoussoukro", "Malaysia": "Kuala Lumpur", "Benin": "Porto-Novo",
        "Austria": "Vienna",
    }
    REGION = {c: ("europe" if i % 4 == 0 else "asia" if i % 4 == 1 else "africa"
                  if i % 4 == 2 else "americas") for i, c in enumerate(CAPITALS)}
    MISTAKES = {"Australia": "Sydney", "Canada": "Toronto", "Brazil": "Rio de Janeiro",
                "Turkey": "Istanbul", "Switzerland": "Zurich", "Nigeria": "Lagos",
                "Morocco": "Casablanca", "Vietnam": "Ho Chi Minh City", "Bolivia": "La Paz",
                "Tanzania": "Dar es Salaam", "Myanmar": "Yangon", "Kazakhstan": "Almaty"}
    WRONG = set(MISTAKES.values()) | {"Kyoto", "Salzburg"}
    class Capital(BaseModel):
        city: str
    def answer(request):
        text = request.messages[-1].text
        country = next(c for c in sorted(CAPITALS, key=len, reverse=True) if c in text)
        return f"Capital(city={MISTAKES.get(country, CAPITALS[country])!r})"
    def verdict(request):
        text = request.messages[-1].text
        if any(w in text for w in WRONG):
            return "Verdict(reason='It names the largest city, not the capital.', passed=False)"
        return "Verdict(reason='It names the capital.', passed=True)"
    lm = lf.llms.Scripted([answer], loop=True)
    judge = lf.eval.judge(lf.llms.Scripted([verdict], loop=True), "The answer names the capital.")
    async def capital(country, session):
        return await session.query("What is the capital of {{c}}?", Capital, lm=lm,
                                   vars={"c": country})
    def city(ctx):
        return ctx.output.city == ctx.expected
    def short(ctx):
        return min(1.0, 8 / len(ctx.output.city))
    ds = lf.eval.Dataset([lf.eval.Case(c, expected=v, id=c.lower().replace(" ", "-"),
                                       metadata={"region": REGION[c]})
                          for c, v in CAPITALS.items()])
    evaluators = [city, judge, lf.eval.max_steps(1), short]
    """,
    """
    report = await lf.eval.run(capital, ds, evaluators, name="capitals · baseline",
                               progress=False)
    """,
    """
    MISTAKES = {"Japan": "Kyoto", "Bolivia": "La Paz", "Austria": "Salzburg"}
    candidate = await lf.eval.run(capital, ds, evaluators, name="candidate prompt",
                                  progress=False, live=False)
    lf.eval.compare(report, candidate)
    """,
]


def test_screenshots_of_the_report_and_the_compare_view(lab: Lab) -> None:
    """The report with a failing trial's trace open, and a comparison with regressions,
    improvements and a metric beyond noise, in the light and dark themes."""
    lab.page.set_viewport_size({"width": 1400, "height": 1700})  # the report and its trace
    lab.open(write_notebook(lab, "w_eval_shots.ipynb", SHOT_CELLS))
    run_all_nowait(lab)
    lab.wait_cells_done(180_000)
    assert lab.errors() == []
    page = lab.page
    report = page.locator(".lfx-er").first
    report.locator('.lfx-er-row[data-key="australia#0"]').click()
    page.wait_for_function(
        "() => (document.querySelector('.lfx-te .lfx-te-row.lfx-sel')||{innerText: ''})"
        ".innerText.includes('australia#0')",
        timeout=30_000,
    )
    compare = page.locator(".lfx-er").nth(1)
    first = _first_row_cells(lab, 1)
    assert first[1] == "regressed"
    assert compare.locator(".lfx-er-row.lfx-er-improved").count() > 0
    assert "beyond noise" in compare.locator(".lfx-er-metrics").inner_text()
    page.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
    page.wait_for_timeout(400)
    report_out = ".jp-Notebook .jp-Cell >> nth=1 >> .jp-OutputArea"
    compare_out = ".jp-Notebook .jp-Cell >> nth=2 >> .jp-OutputArea"
    for theme in ("light", "dark"):
        set_theme(lab, theme)
        shoot(lab, report_out, f"eval-report-{theme}", f"eval_report_{theme}.png")
        path = shoot(lab, compare_out, f"eval-compare-{theme}", f"eval_compare_{theme}.png")
        assert path.exists()
    set_theme(lab, "light")


HONEST_CELLS = [
    """
    import langfx_nb as lf
    %load_ext langfx_nb
    async def task(x):
        return x if x != 7 else -1  # c7 answers wrong
    def checked(ctx):
        if ctx.inputs >= 8:
            raise KeyError("no reference for this case")  # c8, c9: evaluator errors
        return ctx.output == ctx.expected
    def cost(ctx):
        return 0.002  # a number, not a check
    cases = [lf.eval.Case(i, expected=i, id=f"c{i}") for i in range(10)]
    report = await lf.eval.run(task, cases, [checked, cost], name="honest")
    """,
]


def test_an_honest_headline_failing_only_and_the_failed_check_in_the_trace(lab: Lab) -> None:
    """7 right of 10 with 2 evaluator errors reads 70% over 10 trials with the errors beside
    it; "failing only" lists the 3 trials that did not pass, not the 7 that passed with a
    numeric score below 1; the run shows one view; a click on a failing trial opens a trace
    named like its row, with the failing check marked failed."""
    lab.open(write_notebook(lab, "w_eval_honest.ipynb", HONEST_CELLS))
    run_all_nowait(lab)
    lab.wait_cells_done(120_000)
    assert lab.errors() == []
    page = lab.page
    report = page.locator(".lfx-er").first
    page.wait_for_function(
        "() => (document.querySelector('.lfx-er .lfx-er-count')||{}).textContent === '10 rows'"
    )
    out = page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-OutputArea")
    assert out.locator(".lfx-er").count() == 1
    assert out.locator(".lfx-bv").count() == 0  # no batch view beside the report
    metrics = report.locator(".lfx-er-metrics").inner_text()
    assert "70.0%" in metrics and "n=10 · 2 errors" in metrics, metrics
    assert "87.5%" not in metrics

    report.locator("label:has-text('failing only') input").check()
    page.wait_for_function(
        "() => document.querySelector('.lfx-er .lfx-er-count').textContent === '3 of 10 rows'"
    )
    keys = page.evaluate(
        "() => [...document.querySelector('.lfx-er').querySelectorAll('.lfx-er-row')]"
        ".map(r => r.dataset.key).sort()"
    )
    assert keys == ["c7#0", "c8#0", "c9#0"]

    report.locator('.lfx-er-row[data-key="c7#0"]').click()
    page.wait_for_function(
        "() => (document.querySelector('.lfx-te .lfx-te-row.lfx-sel')||{innerText: ''})"
        ".innerText.includes('c7#0')",
        timeout=30_000,
    )
    rows = page.evaluate(
        "() => [...document.querySelectorAll('.lfx-te .lfx-te-row')].map(r => r.innerText)"
    )
    checked = [r for r in rows if "checked" in r]
    assert checked and "failed" in checked[0], rows
    assert not any("item 7" in r for r in rows), rows


RERUN_CELLS = [
    """
    import pathlib, tempfile
    import langfx_nb as lf
    %load_ext langfx_nb
    RUN = pathlib.Path(tempfile.mkdtemp()) / "fix.sqlite"
    lm = lf.llms.StaticResponse("Paris")
    %lf use lm
    async def ask(country, session):  # no lm=: the notebook's default model answers
        return await session.query("The capital of {{c}}?", vars={"c": country})
    def wild(ctx):
        return 1e999  # not a finite score: an error of the trial, not a broken view
    before = await lf.eval.run(ask, [lf.eval.Case("France", expected="Lyon", id="fr")],
                               [lf.eval.exact, wild], run=RUN, name="before the fix")
    """,
    """
    after = await lf.eval.run(ask, [lf.eval.Case("France", expected="Paris", id="fr")],
                              [lf.eval.exact, wild], run=RUN, name="after the fix")
    """,
]


def test_the_default_model_a_non_finite_score_and_a_re_scored_trial(lab: Lab) -> None:
    """After ``%lf use lm`` an evaluation's task answers with that model (no "no model"
    failure); a score of 1e999 shows as an error in a working view; fixing the expected
    answer with the same ``run=`` re-scores the stored output, and the report says so."""
    lab.open(write_notebook(lab, "w_eval_rerun.ipynb", RERUN_CELLS))
    run_all_nowait(lab)
    lab.wait_cells_done(120_000)
    assert lab.errors() == []
    page = lab.page
    page.wait_for_function("() => document.querySelectorAll('.lfx-er .lfx-er-row').length === 2")
    assert page.locator(".lfx-bv").count() == 0
    before, after = page.locator(".lfx-er").nth(0), page.locator(".lfx-er").nth(1)
    head = before.locator(".lfx-er-head").inner_text()
    assert "0 failed" in head, head  # the task had a model
    cells = _first_row_cells(lab, 0)
    assert cells[1] == "ok" and cells[2] == "fail" and cells[3] == "error", cells
    assert "Paris" in cells[4]
    head = after.locator(".lfx-er-head").inner_text()
    assert "1 re-scored" in head and "0 failed" in head, head
    cells = _first_row_cells(lab, 1)
    assert cells[1] == "ok ↻" and cells[2] == "pass", cells
    status = after.locator(".lfx-er-row span").nth(1).get_attribute("title") or ""
    assert "expected answer changed" in status
