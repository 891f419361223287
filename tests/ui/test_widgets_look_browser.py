"""What a reader sees, in a real JupyterLab + chromium, in the light and dark themes at 1400 and
900 px: screenshots of the explorer (details + timeline), the approval prompt and the stream
view go to ``artifacts/ui/`` (``LANGFX_NB_DOC_IMAGES=1`` also refreshes ``docs/images/``), and
the test asserts what a user relies on: the selected row's contrast, no list bullets in result
trees, log messages shown and filterable, copy buttons copying the shown text, the keyboard,
the empty-filter message, and the view state surviving a page reload.
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .conftest import ARTIFACTS, ROOT, Lab
from .test_widgets_browser import run_all_nowait, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(400)]

DOC_IMAGES = ROOT / "docs" / "images"

CELLS = [
    """
    import pydantic
    import langfx_nb as lf
    from langfx_nb.llms import Scripted, StaticResponse
    from langfx_nb.notebook.approval import ApprovalPolicy
    from langfx_nb.notebook.stream_view import StreamView
    from langfx_nb.notebook.trace_explorer import TraceExplorer

    @lf.tool
    async def add(a: int, b: int) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b

    class Fact(pydantic.BaseModel):
        text: str
        source: str

    class Trip(pydantic.BaseModel):
        city: str
        minutes: int
        note: str = ""

    def final(request):
        return f"The answer is {request.messages[-1].text}."

    facts = [f'Fact(text="{t}", source="almanac")' for t in
             ["Mars looks red because of iron oxide.", "Venus is the hottest planet.",
              "Jupiter has the Great Red Spot. " * 60]]
    session = lf.Session(Scripted([*facts, lf.ToolCall("c1", "add", {"a": 2, "b": 3}), final]))
    for planet in ["Mars", "Venus", "Jupiter"]:
        await session.query("One fact about {{planet}}.", Fact, vars={"planet": planet},
                            system_message="Answer briefly, with a source.")
    session.log("info", "cache warmed in 3 ms")
    session.log("warning", "retrying request after HTTP 429")
    """,
    """
    explorer = TraceExplorer(session, title="demo run")
    explorer
    """,
    """
    lm = StaticResponse('Fact(text="Paris has ' + "many " * 12 + 'bridges", source="guide")',
                        chunk_size=6, delay=0.01)
    fact = await StreamView(schema=Fact, title="a fact, streamed").consume(
        lf.query_stream("A fact about Paris", Fact, lm=lm))
    """,
    """
    policy = ApprovalPolicy(tools=[add], render_timeout=120)
    answer = await lf.Agent("add 2 and 3", tools=[add], allow_tool=policy).invoke(session)
    print("ANSWER:", answer)
    """,
    """
    lm = StaticResponse('Trip(minutes="a few")', chunk_size=4)
    await StreamView(schema=Trip, title="a trip, failing validation").consume(
        lf.query_stream("How long?", Trip, lm=lm))
    """,
]

THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}


def set_theme(lab: Lab, name: str) -> None:
    lab.command("apputils:change-theme", {"theme": THEMES[name]})
    light = "true" if name == "light" else "false"
    lab.page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'")
    lab.page.wait_for_timeout(400)


def shoot(lab: Lab, selector: str, label: str, doc_name: str | None = None) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"look-{label}.png"
    element = lab.page.locator(selector).first
    element.scroll_into_view_if_needed()
    element.screenshot(path=str(path))
    if doc_name and os.environ.get("LANGFX_NB_DOC_IMAGES"):
        DOC_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, DOC_IMAGES / doc_name)
    return path


_CONTRAST = """(el) => {
  const parse = (c) => {
    const m = c.match(/rgba?\\(([^)]+)\\)/);
    if (m) { const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
             return [p[0] / 255, p[1] / 255, p[2] / 255, p.length > 3 ? p[3] : 1]; }
    const s = c.match(/color\\(srgb ([^)]+)\\)/);
    if (s) { const p = s[1].split(/[ /]+/).filter(Boolean).map(Number);
             return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; }
    throw new Error('unknown colour ' + c);
  };
  const lum = ([r, g, b]) => {
    const f = (v) => v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  // the row's own background, over the page background when translucent
  let bg = parse(getComputedStyle(el).backgroundColor);
  if (bg[3] < 1) {
    let p = el.parentElement, under = [1, 1, 1, 1];
    while (p) { const c = parse(getComputedStyle(p).backgroundColor);
                if (c[3] > 0) { under = c; break; } p = p.parentElement; }
    bg = [0, 1, 2].map((i) => bg[i] * bg[3] + under[i] * (1 - bg[3]));
  }
  const name = el.querySelector('.lfx-te-name');
  let fg = parse(getComputedStyle(name).color);
  if (fg[3] < 1) fg = [0, 1, 2].map((i) => fg[i] * fg[3] + bg[i] * (1 - fg[3]));
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""


def rows(lab: Lab) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = lab.page.evaluate(
        """() => [...document.querySelectorAll('.lfx-te-row')]
            .filter(r => r.style.display !== 'none')
            .map(r => ({id: r.dataset.id, kind: r.querySelector('.lfx-te-kind').textContent,
                        name: r.querySelector('.lfx-te-name').textContent,
                        hint: (r.querySelector('.lfx-te-hint') || {}).textContent || '',
                        selected: r.classList.contains('lfx-sel')}))"""
    )
    return found


def select_row(lab: Lab, kind: str, hint: str) -> None:
    row = lab.page.locator(".lfx-te-row", has=lab.page.locator(".lfx-te-kind", has_text=kind))
    row.filter(has_text=hint).first.locator(".lfx-te-name").click()


def filter_rows(lab: Lab, text: str) -> None:
    box = lab.page.locator(".lfx-te-filter").first
    box.fill(text)
    lab.page.wait_for_timeout(400)


def test_explorer_approval_and_stream_read_well_in_both_themes(lab: Lab) -> None:
    lab.page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    name = write_notebook(lab, "w_look.ipynb", [textwrap.dedent(c) for c in CELLS])
    lab.open(name)
    run_all_nowait(lab)
    try:
        prompt = lab.page.locator(".lfx-ap-pending")
        prompt.wait_for(timeout=90_000)
        # the prompt's buttons are styled: Approve primary, Deny danger; the note is one line
        assert "lfx-primary" in (prompt.locator("button.lfx-approve").get_attribute("class") or "")
        assert "lfx-danger" in (prompt.locator("button.lfx-deny").get_attribute("class") or "")
        prompt.locator("button.lfx-deny-note-open").click()
        note = prompt.locator("input.lfx-note")
        assert note.evaluate("(n) => n.scrollWidth <= n.clientWidth + 1")  # placeholder not cut
        # a wrong value is reported at its field
        prompt.locator("button.lfx-edit").click()
        prompt.locator('input[name="a"]').fill("2.5")
        prompt.locator("button.lfx-approve-edited").click()
        field = prompt.locator(".lfx-form-row", has=lab.page.locator('input[name="a"]'))
        assert "a: expected an integer" in field.locator(".lfx-field-error").inner_text()
        prompt.locator('input[name="a"]').fill("2")
        for theme in ("light", "dark"):
            set_theme(lab, theme)
            for width in (1400, 900):
                lab.page.set_viewport_size({"width": width, "height": 1000})
                doc = "approval.png" if (theme, width) == ("light", 1400) else None
                shoot(lab, ".lfx-ap", f"approval-{theme}-{width}", doc)
        set_theme(lab, "light")
        lab.page.set_viewport_size({"width": 1400, "height": 1000})
        prompt.locator("button.lfx-approve").click()
        lab.wait_cells_done()
        assert "ANSWER: The answer is 5." in lab.page.inner_text(".jp-Notebook")

        # -- the explorer: log rows keep their message and are filterable ------------------
        lab.page.locator(".lfx-te-row", has_text="retrying request").first.wait_for()
        all_rows = rows(lab)
        logs = [r for r in all_rows if r["kind"] == "log"]
        assert {r["hint"] for r in logs} >= {
            "cache warmed in 3 ms",
            "retrying request after HTTP 429",
        }
        facts = [r for r in all_rows if r["name"] == "query:Fact"]
        assert len(facts) == 3 and len({r["hint"] for r in facts}) == 3, facts  # told apart
        filter_rows(lab, "HTTP 429")
        shown = [r for r in rows(lab) if r["kind"] == "log"]
        assert [r["hint"] for r in shown] == ["retrying request after HTTP 429"]
        filter_rows(lab, "no such thing anywhere")
        empty = lab.page.locator(".lfx-te-empty").first
        assert "No nodes match" in empty.inner_text()
        filter_rows(lab, "")

        # -- details: chat-style prompt, folded long text, copy buttons ----------------------
        select_row(lab, "query", "Jupiter")
        detail = lab.page.locator(".lfx-te-detail").first
        detail.locator(".lfx-msg-system").first.wait_for(timeout=30_000)
        assert "Answer briefly, with a source." in detail.locator(".lfx-msg-system").inner_text()
        answer = detail.locator(".lfx-msg-assistant").first
        assert answer.locator("button.lfx-more").count() == 1  # the long answer is folded
        # copy buttons copy the whole text, also when it is shown folded
        answer.locator("button.lfx-copy").first.click()
        lab.page.wait_for_timeout(200)
        copied = lab.page.evaluate("() => navigator.clipboard.readText()")
        long_fact = 'Fact(text="' + "Jupiter has the Great Red Spot. " * 60 + '", source="almanac")'
        assert copied == long_fact, copied[:200]
        detail.locator(".lfx-msg-user button.lfx-copy").first.click()
        lab.page.wait_for_timeout(200)
        assert "One fact about Jupiter." in lab.page.evaluate(
            "() => navigator.clipboard.readText()"
        )
        meta = detail.locator(".lfx-te-meta").inner_text()
        assert "cost —" in meta and "$0 (incl." not in meta  # no price known: not "$0"

        # -- the selected row reads well in both themes; no bullets in result trees ---------
        for theme in ("light", "dark"):
            set_theme(lab, theme)
            selected = lab.page.locator(".lfx-te-row.lfx-sel").first
            ratio = selected.evaluate(_CONTRAST)
            assert ratio >= 4.5, (theme, ratio)
            bullets = lab.page.evaluate(
                """() => [...document.querySelectorAll('.lfx li, .lfx-fb li, .lfx-md li')]
                    .filter(li => !li.closest('.lfx-md'))
                    .map(li => getComputedStyle(li).listStyleType)
                    .filter(t => t !== 'none')"""
            )
            assert bullets == [], (theme, bullets)
            for width in (1400, 900):
                lab.page.set_viewport_size({"width": width, "height": 1000})
                lab.page.wait_for_timeout(300)
                filter_box = lab.page.locator(".lfx-te-filter").first
                assert filter_box.bounding_box()["width"] >= 150  # type: ignore[index]
                doc = "explorer.png" if (theme, width) == ("light", 1400) else None
                shoot(lab, ".lfx-te", f"explorer-{theme}-{width}", doc)
                views = lab.page.locator(".lfx-sv")
                for i in range(views.count()):
                    doc = "stream.png" if (theme, width, i) == ("light", 1400, 1) else None
                    views.nth(i).scroll_into_view_if_needed()
                    views.nth(i).screenshot(
                        path=str(ARTIFACTS / f"look-stream{i}-{theme}-{width}.png")
                    )
                    if doc and os.environ.get("LANGFX_NB_DOC_IMAGES"):
                        shutil.copy2(
                            ARTIFACTS / f"look-stream{i}-{theme}-{width}.png", DOC_IMAGES / doc
                        )
                lab.page.screenshot(
                    path=str(ARTIFACTS / f"look-page-{theme}-{width}.png"), full_page=True
                )
        set_theme(lab, "light")
        lab.page.set_viewport_size({"width": 1400, "height": 1000})

        # -- the stream views: honest status ----------------------------------------------
        ok_view, bad_view = lab.page.locator(".lfx-sv").nth(0), lab.page.locator(".lfx-sv").nth(1)
        assert "StreamView" not in ok_view.inner_text()
        assert "✓ validated" in ok_view.inner_text()
        bad = bad_view.inner_text()
        assert "✓ minutes" not in bad and "valid integer" in bad, bad
        assert "missing required: city" in bad, bad

        # -- keyboard --------------------------------------------------------------------
        tree = lab.page.locator(".lfx-te-scroll").first
        tree.focus()
        assert lab.page.evaluate("() => document.activeElement.classList.contains('lfx-te-scroll')")
        # the selection is drawn on the next frame: wait for it before reading the rows
        selected_at = """(end) => { const rs = [...document.querySelectorAll('.lfx-te-row')]
            .filter(r => r.style.display !== 'none');
            const r = end ? rs[rs.length - 1] : rs[0];
            return !!r && r.classList.contains('lfx-sel'); }"""
        lab.page.keyboard.press("End")
        lab.page.wait_for_function(selected_at, arg=True, timeout=5_000)
        last = [r for r in rows(lab) if r["selected"]]
        lab.page.keyboard.press("Home")
        lab.page.wait_for_function(selected_at, arg=False, timeout=5_000)
        first = [r for r in rows(lab) if r["selected"]]
        assert last and first and last[0]["id"] != first[0]["id"]
        assert first[0]["kind"] == "session"
        lab.page.keyboard.press("ArrowDown")
        lab.page.keyboard.press("Enter")  # opens the details maximized
        assert "lfx-max" in (lab.page.locator(".lfx-te").first.get_attribute("class") or "")
        lab.page.keyboard.press("Escape")
        lab.page.keyboard.press("/")
        assert lab.page.evaluate("() => document.activeElement.classList.contains('lfx-te-filter')")

        # -- view state survives a reload ----------------------------------------------------
        select_row(lab, "query", "Venus")
        filter_rows(lab, "query")
        lab.page.wait_for_timeout(800)  # the view state is written back debounced
        # save (the outputs hold the widget views; the kernel lives on), then reload
        lab.page.evaluate("() => window.jupyterapp.shell.currentWidget.context.save()")
        lab.page.wait_for_function(
            "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000
        )
        lab.page.reload(wait_until="domcontentloaded")
        lab.page.wait_for_function("() => !!window.jupyterapp", timeout=60_000)
        lab.wait_kernel_idle()
        lab.page.locator(".lfx-te-row.lfx-sel").first.wait_for(timeout=60_000)
        assert lab.page.locator(".lfx-te-filter").first.input_value() == "query"
        chosen = [r for r in rows(lab) if r["selected"]]
        assert chosen and "Venus" in chosen[0]["hint"], chosen
    finally:
        set_theme(lab, "light")


def test_saved_ten_thousand_node_trace_shows_rows_and_timeline(lab: Lab, tmp_path: Path) -> None:
    """The timeline column is drawn for the rows on screen only, so a big trace stays quick."""
    import json

    nodes = [
        {"id": "root", "kind": "session", "name": "s", "start": 0.0, "end": 100.0, "status": "ok"}
    ]
    for i in range(10_000):
        nodes.append(
            {
                "id": f"n{i}",
                "parent_id": "root" if i % 100 == 0 else f"n{i - i % 100}",
                "kind": "query" if i % 3 else "tool_call",
                "name": f"step {i}",
                "start": i * 0.01,
                "end": i * 0.01 + 0.5,
                "status": "ok" if i % 7 else "failed",
            }
        )
    path = lab.server.root / "big_trace.json"
    path.write_text(json.dumps({"format": "langfx_nb.trace", "version": 1, "nodes": nodes}))
    cell = "from langfx_nb.notebook.trace_explorer import TraceExplorer\n"
    lab.open(write_notebook(lab, "w_big.ipynb", [cell + "TraceExplorer('big_trace.json')"]))
    lab.run_all_and_wait()
    lab.page.locator(".lfx-te-bar-tl").first.wait_for(timeout=60_000)
    bars = lab.page.locator(".lfx-te-bar-tl").count()
    assert 0 < bars < 200  # only rows on screen are in the DOM
    assert re.search(r"\d", lab.page.locator(".lfx-te-axis").first.inner_text())
