"""A large saved trace written straight to a file (a batch run's shape), for the windowed
explorer's browser test and benchmark: session → batch → a deep chain of ``deep`` actions,
then items, each with a query, a tool call and a log; every 97th step fails."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BigTrace:
    nodes: int
    failed: int  # nodes with status failed (each has an error "boom <i>")
    deep: int  # length of the chain d0 → d1 → … under the batch
    items: int


def write_big_trace(
    path: Path, nodes: int, *, deep: int = 60, prompt: Callable[[int], str] | None = None
) -> BigTrace:
    """Write a trace of exactly ``nodes`` nodes (at least ``deep + 3``) as the core writes it.
    ``prompt(i)``: step ``i``'s query prompt (default ``"question number {i}"``)."""
    header = {"format": "langfx_nb.trace", "version": 1, "session": {"id": "big"}}
    out = [json.dumps(header)[:-1] + ',"nodes":[']
    add = out.append
    add(
        '{"id":"s","parent_id":null,"kind":"session","name":"session","status":"ok",'
        f'"start":0.0,"end":{float(nodes)}}}'
    )
    add(
        ',{"id":"b","parent_id":"s","kind":"batch","name":"batch","status":"ok",'
        f'"start":0.0,"end":{float(nodes)}}}'
    )
    parent = "b"
    for d in range(deep):
        add(
            f',{{"id":"d{d}","parent_id":"{parent}","kind":"action","name":"deep {d}",'
            f'"status":"ok","start":{d}.0,"end":{d + 1}.0}}'
        )
        parent = f"d{d}"
    made = 2 + deep
    failed = items = 0
    item = ""
    i = 0
    while made < nodes:
        step = i % 4
        if step == 0:
            item = f"i{i}"
            items += 1
            add(
                f',{{"id":"{item}","parent_id":"b","kind":"item","name":"item {i // 4}",'
                f'"status":"ok","start":{i}.0,"end":{i}.9}}'
            )
        elif step == 1:
            add(
                f',{{"id":"q{i}","parent_id":"{item}","kind":"query","name":"query",'
                f'"status":"ok","start":{i}.0,"end":{i}.5,'
                f'"inputs":{{"prompt":{_prompt(prompt, i)}}},"outputs":{{"text":"answer {i}"}},'
                '"usage":{"prompt_tokens":20,"completion_tokens":7,"total_tokens":27}}'
            )
        elif step == 2:
            bad = i % 97 == 2
            failed += bad
            add(
                f',{{"id":"t{i}","parent_id":"{item}","kind":"tool_call","name":"lookup",'
                f'"status":"{"failed" if bad else "ok"}","start":{i}.1,"end":{i}.4,'
                f'"inputs":{{"args":{{"key":{i}}}}}'
                + (f',"error":{{"type":"ToolExecutionError","message":"boom {i}"}}' if bad else "")
                + "}"
            )
        else:
            add(
                f',{{"id":"l{i}","parent_id":"{item}","kind":"log","name":"info","status":"ok",'
                f'"start":{i}.5,"end":{i}.5,"inputs":{{"message":"done {i}"}}}}'
            )
        made += 1
        i += 1
    add("]}")
    path.write_text("".join(out), encoding="utf-8")
    return BigTrace(nodes=nodes, failed=failed, deep=deep, items=items)


def _prompt(prompt: Callable[[int], str] | None, i: int) -> str:
    if prompt is None:
        return f'"question number {i}"'
    return json.dumps(prompt(i), ensure_ascii=False)
