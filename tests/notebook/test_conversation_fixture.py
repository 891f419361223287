"""``js/test/fixtures/protocol_prompt.json`` holds a query node's inputs as the kernel
records them for a protocol prompt; ``js/test/conversation.test.ts`` checks that the
Conversation opens on the user's request in it. This keeps the fixture current
(``LANGFX_REGEN=1`` rewrites it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pydantic

import langfx_nb as lf
from langfx_nb.llms import StaticResponse

FIXTURE = Path(__file__).resolve().parents[2] / "js" / "test" / "fixtures" / "protocol_prompt.json"


class Planet(pydantic.BaseModel):
    name: str
    moons: int


async def test_the_fixture_is_what_a_query_node_records() -> None:
    session = lf.Session(StaticResponse("Planet(name='Mars', moons=2)"))
    template = "How many moons has {{p}}? Answer with the number."
    await session.query(template, Planet, vars={"p": "Mars"})
    (query,) = [n for n in session.trace_store.nodes.values() if n.kind == "query"]
    inputs = json.loads(json.dumps(query.inputs))
    if os.environ.get("LANGFX_REGEN"):
        data = json.loads(FIXTURE.read_text())
        FIXTURE.write_text(json.dumps({**data, "inputs": inputs}, indent=1) + "\n")
    assert json.loads(FIXTURE.read_text())["inputs"] == inputs, (
        "js/test/fixtures/protocol_prompt.json is stale: rerun this test with LANGFX_REGEN=1"
    )
