"""A real OpenAI-wire chat-completions server on 127.0.0.1 that enforces rate limits.

It runs its own asyncio loop in a daemon thread, so the process that started it can run
batches in subprocesses against it, kill them and start others. Limits are counted in
fixed windows of ``window_s`` seconds (a shortened minute): at most ``requests`` requests
and ``tokens`` tokens per window, where a request's tokens are its prompt characters / 4
(rounded up) plus the completion it is given. Beyond them it answers 429 with OpenAI's
headers (``x-ratelimit-*`` and ``retry-after``); every answer carries the same headers when
``headers=True``.

Each prompt carries ``item=<id>``; ``answered[id]`` counts the 200 answers per item, so a
duplicate request for an item is seen (``duplicates``). The answer is JSON
``{"item": id, "label": "label-<id>"}`` (query it with ``protocol="json"``).

Slow mode: a request for an item in ``slow_items`` is held ``slow_s`` seconds before it is
admitted and answered (``holding`` lists the items held now); a client that closes the
connection meanwhile is counted in ``abandoned`` (the item is then neither admitted nor
answered).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
import time
from collections import Counter
from typing import Any

from tests.http_server import Request, ThreadedServer, client_closed, send

_ITEM = re.compile(r"item=(\w+)")


def _text_of(request: dict[str, Any]) -> str:
    return "".join(
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in request["messages"]
    )


def _item_of(request: dict[str, Any], text: str | None = None) -> str:
    match = _ITEM.search(_text_of(request) if text is None else text)
    return match.group(1) if match else "?"


class LimitedServer(ThreadedServer):
    def __init__(
        self,
        *,
        requests: int | None = None,
        tokens: int | None = None,
        window_s: float = 1.0,
        headers: bool = True,
        delay_s: float = 0.0,
        completion_tokens: int = 12,
        slow_items: set[str] | frozenset[str] = frozenset(),
        slow_s: float = 60.0,
    ) -> None:
        super().__init__()
        self.requests_limit = requests
        self.tokens_limit = tokens
        self.window_s = window_s
        self.send_headers = headers
        self.delay_s = delay_s
        self.completion_tokens = completion_tokens
        self.slow_items = set(slow_items)
        self.slow_s = slow_s
        self.holding: set[str] = set()  # slow items held now
        self.abandoned: list[str] = []  # slow items whose client closed the connection
        self.answered: Counter[str] = Counter()
        self.rejected: list[float] = []  # seconds since start of each 429
        self.requests_seen = 0
        self.tokens_used = 0  # tokens of the answered requests
        self.first_at: float | None = None  # seconds since start of the first answer
        self.last_at = 0.0
        self.per_window: dict[int, int] = {}  # tokens answered per window
        self.t0 = time.monotonic()
        self._window = -1
        self._w_requests = 0
        self._w_tokens = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def duplicates(self) -> dict[str, int]:
        return {k: n for k, n in self.answered.items() if n > 1}

    # -- limits -------------------------------------------------------------------------------
    def _admit(self, tokens: int) -> tuple[bool, dict[str, str]]:
        with self._lock:
            now = time.monotonic() - self.t0
            window = int(now // self.window_s)
            if window != self._window:
                self._window, self._w_requests, self._w_tokens = window, 0, 0
            reset = (window + 1) * self.window_s - now
            ok = (self.requests_limit is None or self._w_requests + 1 <= self.requests_limit) and (
                self.tokens_limit is None or self._w_tokens + tokens <= self.tokens_limit
            )
            if ok:
                self._w_requests += 1
                self._w_tokens += tokens
                self.tokens_used += tokens
                self.per_window[window] = self.per_window.get(window, 0) + tokens
                if self.first_at is None:
                    self.first_at = now
                self.last_at = now
            else:
                self.rejected.append(now)
            headers = {}
            if self.send_headers:
                reset_text = f"{max(1, math.ceil(reset * 1000))}ms"
                if self.requests_limit is not None:
                    headers["x-ratelimit-limit-requests"] = str(self.requests_limit)
                    left = self.requests_limit - self._w_requests
                    headers["x-ratelimit-remaining-requests"] = str(max(0, left))
                    headers["x-ratelimit-reset-requests"] = reset_text
                if self.tokens_limit is not None:
                    headers["x-ratelimit-limit-tokens"] = str(self.tokens_limit)
                    left = self.tokens_limit - self._w_tokens
                    headers["x-ratelimit-remaining-tokens"] = str(max(0, left))
                    headers["x-ratelimit-reset-tokens"] = reset_text
            if not ok:
                headers["retry-after-ms"] = str(max(1, math.ceil(reset * 1000)))
            return ok, headers

    # -- HTTP -----------------------------------------------------------------------------------
    async def respond(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        if self.slow_items:
            item = _item_of(json.loads(request.body))
            if item in self.slow_items:
                self.holding.add(item)
                try:
                    closed = await client_closed(request, self.slow_s)
                finally:
                    self.holding.discard(item)
                if closed:
                    with self._lock:
                        self.abandoned.append(item)
                    return False
        status, headers, payload = self._answer(request.body)
        if self.delay_s and status == 200:
            await asyncio.sleep(self.delay_s)
        data = json.dumps(payload).encode()
        await send(writer, status, {"content-type": "application/json", **headers}, data)
        return True

    def _answer(self, body: bytes) -> tuple[int, dict[str, str], Any]:
        request = json.loads(body)
        text = _text_of(request)
        item = _item_of(request, text)
        prompt_tokens = -(-len(text) // 4)
        completion = self.completion_tokens
        with self._lock:
            self.requests_seen += 1
        ok, headers = self._admit(prompt_tokens + completion)
        if not ok:
            error = {"message": "Rate limit reached", "type": "requests", "code": "rate_limit"}
            return 429, headers, {"error": error}
        with self._lock:
            self.answered[item] += 1
        content = json.dumps({"item": item, "label": f"label-{item}"})
        return (
            200,
            headers,
            {
                "id": f"chatcmpl-{item}",
                "object": "chat.completion",
                "created": 0,
                "model": request.get("model", "m"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion,
                    "total_tokens": prompt_tokens + completion,
                },
            },
        )
