"""LanguageModel: the one place that owns normalization, options, capabilities, cache,
retries, usage and cancellation. Providers implement ``_sample`` (and ``_stream``).

Option precedence: model defaults → options the caller passes (a Session merges its own
defaults under the explicit call options before calling). Nothing here mutates the model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import math
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from ..errors import GenerationError, RateLimitError, RetryableError, UnsupportedCapabilityError
from ..messages import AIMessage, Message, Provenance, SystemMessage, Usage, UserMessage
from ..modalities import Mime
from ._redact import Secrets, redact, redact_exception
from .cache import Cache, CacheEntryError, warn_cache_failure
from .ratelimit import (
    Limiter,
    RateLimit,
    Ticket,
    account_id,
    estimate_tokens,
    limiter_for,
    max_wait,
)
from .streaming import StreamAccumulator, StreamChunk

__all__ = [
    "CAPTURE",
    "NO_USAGE",
    "CacheWrites",
    "Capabilities",
    "Capture",
    "LMRequest",
    "LanguageModel",
    "RetryPolicy",
    "Sample",
    "SamplingOptions",
    "SamplingResult",
    "ToolSpec",
    "allow_model_requests",
    "model_requests_allowed",
]

Prompt = str | Message[Any] | Sequence[Message[Any]]
ToolChoice = Literal["auto", "any", "none"] | str


@dataclass(frozen=True, slots=True)
class SamplingOptions:
    """Sampling knobs shared by all providers; ``None`` means "provider default".

    ``thinking_budget`` (tokens the model may think for) and ``reasoning_effort`` (e.g.
    ``"low"``/``"medium"``/``"high"``) ask for reasoning; each provider maps the one it has
    (``Capabilities.reasoning``) and rejects the other before sending.

    Prompt caching: ``prompt_cache_key`` (a routing key: requests that share a long prefix
    and a key hit the same cache) and ``prompt_cache`` (cache breakpoints: ``None``:
    automatic for a long shared system prompt and tool list; ``True``: always; ``False``:
    none but those a message asks for) go to the providers that have them; each provider's
    module says how it sends them, docs/providers.md compares them.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    thinking_budget: int | None = None
    reasoning_effort: str | None = None
    prompt_cache: bool | None = None
    prompt_cache_key: str | None = None

    def merged(self, **overrides: Any) -> SamplingOptions:
        """A copy with the non-``None`` overrides applied; ``self`` is left unchanged."""
        if not overrides:
            return self
        unknown = set(overrides) - _SAMPLING_FIELDS
        if unknown:
            raise TypeError(f"unknown sampling option(s): {', '.join(sorted(unknown))}")
        changes = {k: v for k, v in overrides.items() if v is not None}
        if isinstance(changes.get("stop"), (list, str)):
            stop = changes["stop"]
            changes["stop"] = (stop,) if isinstance(stop, str) else tuple(stop)
        return dataclasses.replace(self, **changes) if changes else self

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


_SAMPLING_FIELDS = frozenset(f.name for f in dataclasses.fields(SamplingOptions))


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a model is told about a tool: a name, a description and a JSON input schema."""

    name: str
    description: str
    input_schema: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a model can accept; requests needing more fail before any I/O."""

    modalities: frozenset[str] = frozenset()  # e.g. {"image", "pdf"}; text is always allowed
    tools: bool = False
    native_schema: bool = False
    reasoning: frozenset[str] = frozenset()  # {"thinking_budget", "reasoning_effort"}


@dataclass(frozen=True, slots=True)
class LMRequest:
    """A normalized request: system text apart, then role-scoped turns, options, tools."""

    messages: tuple[Message[Any], ...]
    options: SamplingOptions = SamplingOptions()
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | None = None
    response_schema: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """Canonical JSON form of what the model is sent; the cache key hashes this.

        Messages contribute their role and parts only: metadata such as ``cache_hit``,
        usage and provenance do not change the answer, so a transcript that carries a
        replayed answer still finds the next turn in the cache.
        """
        out: dict[str, Any] = {"messages": [m.content_json() for m in self.messages]}
        if self.system is not None:
            out["system"] = self.system
        if opts := self.options.to_json():
            out["options"] = opts
        if self.tools:
            out["tools"] = [t.to_json() for t in self.tools]
        if self.tool_choice is not None:
            out["tool_choice"] = self.tool_choice
        if self.response_schema is not None:
            out["response_schema"] = self.response_schema
        return out


@dataclass(frozen=True, slots=True)
class Sample:
    response: AIMessage[Any]
    score: float | None = None


@dataclass(frozen=True, slots=True)
class SamplingResult:
    samples: list[Sample]
    usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Opt-in retries of ``RetryableError``s: exponential backoff with jitter.

    No wait is ever longer than ``max_delay``. A ``RateLimitError.retry_after`` from the
    provider wins over the computed delay when it is a finite number of seconds up to
    ``max_delay`` (negative counts as 0); when the server asks for longer, the error is
    raised at once (its ``retry_after`` tells the caller how long), and a malformed or
    non-finite value is ignored in favour of the computed delay. ``sleep`` and ``random`` are
    injectable so tests use a fake clock.
    """

    max_attempts: int = 3
    initial_delay: float = 1.0
    max_delay: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.5
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, compare=False)
    random: Callable[[], float] = field(default=random.random, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def delay(self, attempt: int, error: BaseException) -> float | None:
        """Seconds to wait after failed attempt number ``attempt`` (1-based), at most
        ``max_delay``; ``None`` when the server asks for a longer wait (do not retry)."""
        retry_after = _seconds(getattr(error, "retry_after", None))
        if retry_after is not None:
            return retry_after if retry_after <= self.max_delay else None
        try:
            grown = self.initial_delay * self.multiplier ** (attempt - 1)
        except OverflowError:
            grown = math.inf
        base = min(self.max_delay, grown)
        return max(0.0, base * (1.0 - self.jitter * self.random()))


def _seconds(value: Any) -> float | None:
    """A server's wait hint as finite, non-negative seconds; ``None`` when it is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond float range: longer than any max_delay
        return math.inf
    if math.isnan(seconds) or seconds == -math.inf:
        return None
    return max(0.0, seconds)


_DEFAULT_RETRY = RetryPolicy()
_ALLOW_REQUESTS = True


def allow_model_requests(allowed: bool) -> None:
    """Turn real network model requests on or off (tests switch them off).

    Injected transports and clients (``httpx.MockTransport`` etc.) are never blocked.
    """
    global _ALLOW_REQUESTS
    _ALLOW_REQUESTS = allowed


def model_requests_allowed() -> bool:
    return _ALLOW_REQUESTS


class CacheWrites(Protocol):
    """Where a captured call's LLM-cache write goes instead of ``cache.put``: kept and
    written later, many in one transaction (a batch engine replaying many answers)."""

    def put(self, cache: Cache, key: str, value: dict[str, Any]) -> None: ...
    def discard(self, cache: Cache, key: str) -> None: ...


class Capture(Protocol):
    """Answers a model call instead of the wire: the one hook by which someone else (the
    provider-batch engine, through ``llms/deferred.py``) answers the calls made in a
    context. It knows no provider: it receives the model and the built request, and returns
    the message the model's own ``decode`` made of an answer. Defined here, beside what it
    receives, so that ``deferred`` depends on this module and not the other way round.

    ``reads_cache``: whether the call looks the LLM cache up before ``answer`` (a hit is
    returned and ``answer`` is not called). ``cache_writes``: where the answer's cache
    write goes (``None``: ``cache.put`` at once); ``forget_cached`` discards it there too.
    """

    @property
    def reads_cache(self) -> bool: ...
    @property
    def cache_writes(self) -> CacheWrites | None: ...
    async def answer(self, model: LanguageModel, request: LMRequest) -> AIMessage[Any]: ...


#: The ``Capture`` answering this context's model calls (``deferred.capturing`` sets it).
CAPTURE: ContextVar[Capture | None] = ContextVar("langfx_nb_capture", default=None)

#: The usage of a model that has made no request (``Usage`` is frozen, so one is shared).
NO_USAGE = Usage()

_CALL_KEYS = frozenset(
    {
        "system_message",
        "tools",
        "tool_choice",
        "response_schema",
        "cache_seed",
        "use_cache",
        "max_tokens_cap",
    }
)


class LanguageModel:
    """Base class for every model. Subclasses implement ``_sample`` and optionally ``_stream``.

    Public methods are coroutines / async iterators: ``call``, ``sample``, ``stream``.
    """

    provider: ClassVar[str] = "custom"
    capabilities: ClassVar[Capabilities] = Capabilities()
    #: The provider's name in other vocabularies, read for a ``provider:model`` id from a
    #: trace (``registry.provider_class``): OpenTelemetry's ``gen_ai.provider.name``
    #: (``None``: ``provider`` itself) and the ``genai-prices`` id (``None``: not priced there).
    otel_provider: ClassVar[str | None] = None
    genai_prices_provider: ClassVar[str | None] = None

    def __init__(
        self,
        model: str | None = None,
        *,
        sampling: SamplingOptions | None = None,
        cache: Cache | None = None,
        retry: RetryPolicy | None = None,
        max_attempts: int | None = None,
        rate_limit: RateLimit | None = None,
        **sampling_options: Any,
    ) -> None:
        if rate_limit is not None and not isinstance(rate_limit, RateLimit):
            raise TypeError("rate_limit must be an lf.RateLimit")
        self.model = model
        #: requests/tokens per minute shared by every model of the same account (ratelimit.py)
        self.rate_limit = rate_limit
        self.sampling = (sampling or SamplingOptions()).merged(**sampling_options)
        self.cache = cache
        if retry is None and max_attempts is not None:
            retry = RetryPolicy(max_attempts=max_attempts)
        self.retry = retry
        self.total_usage = NO_USAGE  # immutable: replaced, never changed, by each response
        self.num_requests = 0
        #: key values and secret header values this model has sent; removed from the text of
        #: every error it raises (a server may echo them back)
        self._secrets = Secrets()

    # -- identity ------------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        """``provider:model``; also the provenance stamped on responses."""
        return f"{self.provider}:{self.model}" if self.model else self.provider

    @property
    def server(self) -> str | None:
        """``host:port`` of the server this model's requests go to (None: it answers in
        this process). Traces record it for the OpenTelemetry ``server.address``."""
        return None

    def cache_identity(self) -> dict[str, Any]:
        """What distinguishes this model's answers; providers add endpoint details."""
        return {"model": self.model_id, "class": type(self).__qualname__}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_id!r})"

    def redact(self, text: str) -> str:
        """``text`` without the key values and secret header values this model has sent
        (an error text a server sent, written to errors, manifests and traces)."""
        return redact(text, self._secrets.values())

    @property
    def supports_streaming(self) -> bool:
        return type(self)._stream is not LanguageModel._stream

    # -- request building ----------------------------------------------------------------
    def build_request(self, prompt: Prompt, **options: Any) -> LMRequest:
        """Normalize a prompt and options and check capabilities (no I/O happens here)."""
        extra = {k: options.pop(k) for k in list(options) if k in _CALL_KEYS}
        opts = self.sampling.merged(**options)
        turns, system = _normalize_prompt(prompt)
        if (sm := extra.get("system_message")) is not None:
            sm_text = sm.text if isinstance(sm, Message) else str(sm)
            system = sm_text if system is None else f"{sm_text}\n\n{system}"
        tools = tuple(extra.get("tools") or ())
        request = LMRequest(
            messages=tuple(turns),
            options=opts,
            system=system,
            tools=tuple(t if isinstance(t, ToolSpec) else _tool_spec(t) for t in tools),
            tool_choice=extra.get("tool_choice"),
            response_schema=extra.get("response_schema"),
        )
        self.check_capabilities(request)
        return request

    def check_capabilities(self, request: LMRequest) -> None:
        caps = self.capabilities
        if request.tools and not caps.tools:
            raise UnsupportedCapabilityError(f"{self.model_id} does not support tools")
        if request.response_schema is not None and not caps.native_schema:
            raise UnsupportedCapabilityError(
                f"{self.model_id} does not support native structured output"
            )
        o = request.options
        for name, value in (
            ("thinking_budget", o.thinking_budget),
            ("reasoning_effort", o.reasoning_effort),
        ):
            if value is not None and name not in caps.reasoning:
                other = " (it takes " + " or ".join(sorted(caps.reasoning)) + ")"
                raise UnsupportedCapabilityError(
                    f"{self.model_id} has no {name} option{other if caps.reasoning else ''}"
                )
        if o.thinking_budget is not None and (
            not isinstance(o.thinking_budget, int) or isinstance(o.thinking_budget, bool)
        ):
            raise TypeError("thinking_budget must be an int (tokens)")
        if o.reasoning_effort is not None and (
            not isinstance(o.reasoning_effort, str) or not o.reasoning_effort
        ):
            raise TypeError("reasoning_effort must be a non-empty string, e.g. 'low'")
        if caps.modalities >= Mime.kinds():
            return  # every payload accepted: no part to look at (an agent's whole transcript
            # every step, benchmarks/otel_export.py (c))
        for m in request.messages:
            for p in m.parts:
                if isinstance(p, Mime) and p.kind not in caps.modalities:
                    raise UnsupportedCapabilityError(
                        f"{self.model_id} does not accept {p.kind} input"
                    )

    def _cache_key(self, request: LMRequest, cache_seed: int) -> str:
        payload = {"lm": self.cache_identity(), "request": request.to_json(), "seed": cache_seed}
        text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=repr)
        # surrogatepass: a lone surrogate in a prompt must not make the key unencodable
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    # -- public API ----------------------------------------------------------------------
    async def call(self, prompt: Prompt, **options: Any) -> AIMessage[Any]:
        """Send one prompt and return the response message.

        With a cache, a stored answer is returned without a request (``metadata.cache_hit``)
        and a fresh one is stored; a cache that fails costs one ``CacheWarning``, never the
        call or the answer. ``max_tokens_cap=N`` (a budget's) lowers the ``max_tokens`` sent
        without changing which stored answer is found or where an answer that ended on its
        own is stored (see ``_store_under``).
        """
        cache_seed = int(options.pop("cache_seed", 0) or 0)
        use_cache = bool(options.pop("use_cache", True))
        cap = options.pop("max_tokens_cap", None)
        request = self.build_request(prompt, **options)
        sent = _capped(request, cap)
        capture = CAPTURE.get()  # someone else answers instead (llms/deferred.py)
        read = capture is None or capture.reads_cache
        lookup = await self._cache_lookup(request, cache_seed, use_cache, read=read)
        if lookup.hit is not None:
            return lookup.hit
        response = self._finish(await self._answer(capture, sent))
        lookup = self._store_under(lookup, sent, response, cache_seed)
        await self._cache_store(lookup, response, None if capture is None else capture.cache_writes)
        return response

    async def _answer(self, capture: Any, sent: LMRequest) -> AIMessage[Any]:
        """The whole answer to ``sent``: from the context's ``Capture`` when one is set,
        else over the wire (rate limited, retried). An unusable answer (truncated, refused,
        empty) is counted before its ``GenerationError`` leaves: the provider billed it."""
        try:
            if capture is not None:
                return await capture.answer(self, sent)
            return await self._with_retries(lambda: self._limited(sent))
        except GenerationError as exc:
            self._unusable(exc)
            raise

    async def cached(self, prompt: Prompt, **options: Any) -> AIMessage[Any] | None:
        """The stored answer ``call`` (or ``stream``) would give for this prompt and options
        without sending a request; ``None`` when there is none (no cache, ``use_cache=False``,
        not stored, or the cache failed, which warns as ``call`` does)."""
        cache_seed = int(options.pop("cache_seed", 0) or 0)
        use_cache = bool(options.pop("use_cache", True))
        options.pop("emulate", None)
        options.pop("max_tokens_cap", None)
        request = self.build_request(prompt, **options)
        return (await self._cache_lookup(request, cache_seed, use_cache)).hit

    async def sample(self, prompts: Sequence[Prompt], **options: Any) -> list[SamplingResult]:
        """One sampling result per prompt, in order (run concurrently)."""
        responses = await asyncio.gather(*(self.call(p, **dict(options)) for p in prompts))
        return [SamplingResult([Sample(r)], r.usage) for r in responses]

    async def stream(self, prompt: Prompt, **options: Any) -> AsyncIterator[StreamChunk]:
        """Yield chunks as they arrive; errors raise from the iterator.

        Models without ``_stream`` raise ``UnsupportedCapabilityError`` unless called with
        ``emulate=True``, which yields the whole ``_sample`` response as one final chunk.
        Retries (when configured) happen only before the first chunk is yielded. With a
        cache, a stored answer is replayed as one final chunk (``metadata.cache_hit``), and a
        stream that ends with its final chunk is stored, as ``call`` stores its answers. The
        provider's stream is closed in ``finally`` (end, error, ``aclose()``, cancellation);
        cancellation is never caught, so the consumer sees it exactly as asyncio raised it.
        """
        emulate = bool(options.pop("emulate", False))
        cache_seed = int(options.pop("cache_seed", 0) or 0)
        use_cache = bool(options.pop("use_cache", True))
        cap = options.pop("max_tokens_cap", None)
        request = self.build_request(prompt, **options)
        sent = _capped(request, cap)
        if not self.supports_streaming and not emulate:
            raise UnsupportedCapabilityError(f"{self.model_id} does not support streaming")
        capture = CAPTURE.get()
        read = capture is None or capture.reads_cache
        lookup = await self._cache_lookup(request, cache_seed, use_cache, read=read)
        if lookup.hit is not None:
            yield _whole_chunk(lookup.hit, self.model_id)
            return
        if capture is not None or not self.supports_streaming:
            response = self._finish(await self._answer(capture, sent))
            lookup = self._store_under(lookup, sent, response, cache_seed)
            await self._cache_store(
                lookup, response, None if capture is None else capture.cache_writes
            )
            yield _whole_chunk(response, self.model_id)
            return
        attempt = 0
        while True:
            attempt += 1
            limiter = self.rate_limiter()
            ticket = None if limiter is None else await self._admit(limiter, sent)
            agen = self._stream(sent)
            emitted = False
            try:
                async for chunk in agen:
                    if chunk.final:
                        if ticket is not None:
                            ticket.settle(_tokens(chunk.usage))
                        self._account(chunk.usage)
                        done = chunk.aggregated
                        await self._cache_store(
                            self._store_under(lookup, sent, done, cache_seed), done
                        )
                    emitted = True
                    yield chunk
                return
            except Exception as exc:
                if limiter is not None and isinstance(exc, RateLimitError):
                    limiter.throttle(exc.retry_after)
                if isinstance(exc, GenerationError):
                    if ticket is not None and exc.response is not None:
                        ticket.settle(_tokens(exc.response.usage))
                    self._unusable(exc)
                await self._retry_or_raise(exc, attempt, retry=not emitted)
            finally:
                if ticket is not None:
                    ticket.settle(None)  # ended without a final chunk: the estimate stands
                await agen.aclose()

    # -- rate limits -------------------------------------------------------------------------
    def rate_limiter(self) -> Limiter | None:
        """The limiter this model's requests wait in (shared per account), or None.

        A model answering in-process has one only when given ``rate_limit=``; HTTP models
        always have one (provider headers may set limits, see ``ratelimit.py``)."""
        if self.rate_limit is None:
            return None
        return limiter_for(
            account_id(self.provider, f"local:{self.model_id}", None), self.rate_limit
        )

    async def _limited(self, request: LMRequest) -> AIMessage[Any]:
        """One ``_sample`` attempt, admitted by the account's limiter first."""
        limiter = self.rate_limiter()
        if limiter is None:
            return await self._sample(request)
        ticket = await self._admit(limiter, request)
        try:
            response = await self._sample(request)
        except BaseException as exc:
            answer = exc.response if isinstance(exc, GenerationError) else None
            # an unusable answer settles at its usage; otherwise the server may have
            # counted the request: the estimate stands
            ticket.settle(None if answer is None else _tokens(answer.usage))
            if isinstance(exc, RateLimitError):
                limiter.throttle(exc.retry_after)
            raise
        ticket.settle(_tokens(response.usage))
        return response

    async def _admit(self, limiter: Limiter, request: LMRequest) -> Ticket:
        """``request``'s ticket from ``limiter``, waiting for a provider's pause or reset no
        longer than the retry policy's ``max_delay`` (``RateLimitError`` at once beyond)."""
        with max_wait((self.retry or _DEFAULT_RETRY).max_delay):
            return await limiter.acquire(_estimate(request))

    # -- provider hooks --------------------------------------------------------------------
    async def _sample(self, request: LMRequest) -> AIMessage[Any]:
        raise NotImplementedError

    async def _stream(self, request: LMRequest) -> AsyncGenerator[StreamChunk, None]:
        raise NotImplementedError
        yield  # pragma: no cover  (makes this an async generator)

    # -- cache -----------------------------------------------------------------------------
    async def _cache_lookup(
        self, request: LMRequest, cache_seed: int, use: bool, *, read: bool = True
    ) -> _Lookup:
        """The stored answer for ``request``, if any (``read=False``: only its key, for the
        write). A failing cache is warned about once and skipped; after a read that failed
        (not just a bad entry) no write is tried."""
        cache = self.cache
        if cache is None or not use:
            return _NO_LOOKUP
        key = self._cache_key(request, cache_seed)
        if not read:
            return _Lookup(key, None, writable=True)
        try:
            data = await cache.get(key)
        except CacheEntryError as exc:
            warn_cache_failure(cache, "a stored entry is damaged; asked the model", exc)
            return _Lookup(key, None, writable=True, warned=True)
        except Exception as exc:
            warn_cache_failure(cache, "could not be read; asked the model", exc)
            return _Lookup(key, None, writable=False, warned=True)
        if data is None:
            return _Lookup(key, None, writable=True)
        try:
            cached = Message.from_json(data)
            if not isinstance(cached, AIMessage):
                raise CacheEntryError(f"the entry holds a {cached.role!r} message, not a response")
        except Exception as exc:
            warn_cache_failure(cache, "a stored entry is not a response; asked the model", exc)
            return _Lookup(key, None, writable=True, warned=True)
        cached.metadata["cache_hit"] = True
        cached.metadata["cache_key"] = key
        return _Lookup(key, cached, writable=False)

    def _store_under(
        self, lookup: _Lookup, sent: LMRequest, response: AIMessage[Any], cache_seed: int
    ) -> _Lookup:
        """Where a fresh answer is stored. A ``max_tokens_cap`` (a budget's) bounds the answer
        but is not part of what the caller asked: an answer that ended on its own is stored
        under the caller's request, so the next identical call finds it whatever the cap is
        then; one the cap cut short (``finish_reason == "length"``) only under the request
        that was sent, never as the answer to the uncapped one."""
        if lookup.key is None or response.metadata.get("finish_reason") != "length":
            return lookup
        key = self._cache_key(sent, cache_seed)
        return lookup if key == lookup.key else dataclasses.replace(lookup, key=key)

    async def _cache_store(
        self, lookup: _Lookup, response: AIMessage[Any], writes: CacheWrites | None = None
    ) -> None:
        """Store a fresh answer (in ``writes``, to be written later, when given); a failed
        write warns (once per call) and loses nothing."""
        if lookup.key is None:
            return
        response.metadata["cache_key"] = lookup.key
        if not lookup.writable or self.cache is None:
            return
        try:
            if writes is not None:
                writes.put(self.cache, lookup.key, response.to_json())
                return
            await self.cache.put(lookup.key, response.to_json())
        except Exception as exc:
            if not lookup.warned:
                warn_cache_failure(self.cache, "could not store the answer (returned anyway)", exc)

    async def forget_cached(self, response: AIMessage[Any]) -> None:
        """Remove ``response`` from the cache (a bad answer must not be replayed). A cache
        that fails warns; the caller's own error is what matters."""
        key = response.metadata.get("cache_key")
        if key is None or self.cache is None:
            return
        capture = CAPTURE.get()
        writes = None if capture is None else capture.cache_writes
        if writes is not None:  # not written yet: it never will be
            writes.discard(self.cache, key)
        try:
            await self.cache.delete(key)
        except Exception as exc:
            warn_cache_failure(self.cache, "could not forget a bad answer", exc)

    # -- internals -----------------------------------------------------------------------
    def _finish(self, response: AIMessage[Any]) -> AIMessage[Any]:
        if response.provenance is None:
            response.provenance = Provenance(model=self.model_id)
        self._account(response.usage)
        return response

    def _unusable(self, error: GenerationError) -> None:
        """A provider answer that raised (``error.response``: truncated, refused, empty) is
        counted as the request it was billed as."""
        if error.response is not None:
            self._finish(error.response)

    def _account(self, usage: Usage | None) -> None:
        self.num_requests += 1
        if usage is not None:
            self.total_usage = self.total_usage + usage

    async def _retry_or_raise(self, error: Exception, attempt: int, *, retry: bool = True) -> None:
        """After failed attempt number ``attempt``: take this model's secrets out of
        ``error``, then either wait and return (the caller tries again) or raise ``error``.
        It is retried only when it is a ``RetryableError``, ``retry`` holds, the policy
        allows another attempt, and the server asks for no longer a wait than the policy's
        ``max_delay``."""
        redact_exception(error, self._secrets)
        policy = self.retry
        if not retry or not isinstance(error, RetryableError):
            raise error
        if policy is None or attempt >= policy.max_attempts:
            raise error
        delay = policy.delay(attempt, error)
        if delay is None:  # the server asks for a longer wait than max_delay
            raise error
        await policy.sleep(delay)

    async def _with_retries(self, fn: Callable[[], Awaitable[AIMessage[Any]]]) -> AIMessage[Any]:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await fn()
            except Exception as exc:
                await self._retry_or_raise(exc, attempt)


@dataclass(frozen=True, slots=True)
class _Lookup:
    """What one call learned from the cache: its key, a hit, and whether to write."""

    key: str | None
    hit: AIMessage[Any] | None
    writable: bool
    warned: bool = False


#: The lookup of a call without a cache (or with ``use_cache=False``): nothing to read or write.
_NO_LOOKUP = _Lookup(None, None, writable=False)


def _whole_chunk(response: AIMessage[Any], model_id: str) -> StreamChunk:
    """A complete response as the one final chunk of a stream (emulation, cache replay)."""
    acc = StreamAccumulator(model_id)
    for p in response.parts:
        acc.add_part(p)
    acc.metadata.update(response.metadata)
    acc.usage = response.usage
    acc.finish_reason = response.metadata.get("finish_reason")
    return StreamChunk(
        response.text, 0, True, response.usage, acc.finish_reason, (), acc, len(acc.parts)
    )


def _capped(request: LMRequest, cap: Any) -> LMRequest:
    """``request`` with its ``max_tokens`` lowered to ``cap`` (``None``: no cap)."""
    if cap is None:
        return request
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ValueError(f"max_tokens_cap must be a positive int, not {cap!r}")
    if request.options.max_tokens is not None and request.options.max_tokens <= cap:
        return request
    return dataclasses.replace(request, options=request.options.merged(max_tokens=cap))


def _estimate(request: LMRequest) -> int:
    """Tokens ``request`` may use, before it is sent (see ``ratelimit.estimate_tokens``)."""
    chars = len(request.system or "") + sum(len(m.text) for m in request.messages)
    return estimate_tokens(chars, request.options.max_tokens)


def _tokens(usage: Usage | None) -> int | None:
    if usage is None:
        return None
    if usage.total_tokens is not None:
        return usage.total_tokens
    if usage.prompt_tokens is None and usage.completion_tokens is None:
        return None
    return (usage.prompt_tokens or 0) + (usage.completion_tokens or 0)


def _tool_spec(tool: Any) -> ToolSpec:
    """Accept any object with a ``spec`` (``lf.Tool``) or a name/description/input_schema."""
    spec = getattr(tool, "spec", None)
    if isinstance(spec, ToolSpec):
        return spec
    if isinstance(tool, Mapping):
        return ToolSpec(tool["name"], tool.get("description", ""), tool["input_schema"])
    raise TypeError(f"not a tool: {tool!r}")


def _normalize_prompt(prompt: Prompt) -> tuple[list[Message[Any]], str | None]:
    """Flatten a prompt into turns; leading system turns become the separate system text."""
    if isinstance(prompt, str):
        return [UserMessage(prompt)], None
    if isinstance(prompt, Message):
        turns = prompt.turns()
    else:
        turns = [t for m in prompt for t in m.turns()]
    leading = 0
    while leading < len(turns) and isinstance(turns[leading], SystemMessage):
        leading += 1
    body = turns[leading:] if leading else turns
    # one pass over the turns' types, not a check per turn: an agent sends its whole
    # transcript every step (benchmarks/otel_export.py (c))
    for kind in set(map(type, body)):
        if issubclass(kind, SystemMessage):
            raise UnsupportedCapabilityError("system messages must come before other turns")
    if not body:
        raise ValueError("a prompt needs at least one non-system message")
    system = "\n\n".join(t.text for t in turns[:leading]) if leading else None
    return body, system
