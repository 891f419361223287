"""The whole langfx_nb error tree, sorted by what a caller can do about it.

    LangFxError
    ├── TemplateError                 a prompt could not be rendered (missing variable, bad syntax)
    ├── LMError                       a model call failed
    │   ├── RetryableError            trying again later may succeed (retries act only on these)
    │   │   ├── RateLimitError        429 / quota; carries ``retry_after`` seconds when known
    │   │   └── ServerError           5xx, overloaded, dropped connection, in-stream server error
    │   ├── AuthenticationError       401 / 403 / invalid key: fix credentials
    │   ├── InvalidRequestError       other 4xx: fix the request
    │   │   └── ContextLengthError    the prompt is too long for the model
    │   ├── UnsupportedCapabilityError the model cannot do what was asked (raised before any I/O)
    │   ├── GenerationError           the model answered, but not usefully
    │   │   ├── ContentFilteredError  safety block, refusal, blocked prompt
    │   │   ├── IncompleteGenerationError  truncated at max tokens
    │   │   └── EmptyGenerationError  no text and no tool calls
    │   ├── StreamProtocolError       a malformed or out-of-order response stream
    │   └── NetworkBlockedError       a real network request while requests are blocked (tests)
    ├── MappingError                  model output did not parse/validate into the schema
    │   └── StreamParseError          a streamed answer broke the protocol's grammar
    ├── InvalidRunStateError          a saved RunState is malformed, inconsistent or not verified
    ├── AgentError                    a tool-using run stopped
    │   ├── ToolDeniedError           the ``allow_tool`` policy refused a call
    │   ├── RunSuspended              a run stopped to wait for approvals (carries its state)
    │   ├── ToolExecutionError        unknown tool, bad arguments, a tool raised, bad output
    │   └── BudgetExceededError       a step, tool-call, token or cost budget ran out
    ├── ExecutionTimeoutError         a deadline expired (also a TimeoutError)
    ├── RunManifestError              a batch's run manifest cannot be used (another run's, damaged)
    ├── ProviderBatchError            a provider batch gave an item no usable answer
    ├── RayEngineError                the Ray engine cannot run (no Ray, no cluster, workers died)
    └── ShippingError                 fn or an item cannot go to another process (a Ray worker)

Messages never contain secrets, nor provider error bodies as such: adapters keep the HTTP
status and a short provider error *type*. One exception: when a server answers a request it
rejects with a 5xx (llama-cpp-python does, for validation failures), nothing else explains the
``InvalidRequestError``, so its message quotes the server's text, credentials masked and cut
at 300 characters.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentError",
    "AuthenticationError",
    "BudgetExceededError",
    "ContentFilteredError",
    "ContextLengthError",
    "EmptyGenerationError",
    "ExecutionTimeoutError",
    "GenerationError",
    "IncompleteGenerationError",
    "InvalidRequestError",
    "InvalidRunStateError",
    "LMError",
    "LangFxError",
    "MappingError",
    "NetworkBlockedError",
    "ProviderBatchError",
    "RateLimitError",
    "RayEngineError",
    "RetryableError",
    "RunManifestError",
    "RunSuspended",
    "ServerError",
    "ShippingError",
    "StreamProtocolError",
    "TemplateError",
    "ToolDeniedError",
    "ToolExecutionError",
    "UnsupportedCapabilityError",
]


class LangFxError(Exception):
    """Root of every error langfx_nb raises on purpose."""


class TemplateError(LangFxError, ValueError):
    """A template could not be parsed or rendered; the message names the variable or position."""


class LMError(LangFxError):
    """A language-model call failed. ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RetryableError(LMError):
    """Trying the same request again later may succeed."""


class RateLimitError(RetryableError):
    def __init__(
        self, message: str, *, status: int | None = 429, retry_after: float | None = None
    ) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


class ServerError(RetryableError):
    """The provider failed or was overloaded (5xx, 529, an in-stream error, a dropped link)."""


class AuthenticationError(LMError):
    pass


class InvalidRequestError(LMError):
    pass


class ContextLengthError(InvalidRequestError):
    pass


class UnsupportedCapabilityError(LMError):
    """The request needs something this model does not support; raised before any I/O."""


class GenerationError(LMError):
    """The model produced a response that cannot be used as an answer.

    ``response`` is that answer as far as it went (an ``AIMessage``: its text and the usage
    the provider reported) when the provider sent one: the provider bills it, so the
    library counts it as a request with its usage and cost, like any other answer."""

    def __init__(self, message: str, *, status: int | None = None, response: Any = None) -> None:
        super().__init__(message, status=status)
        self.response = response


class ContentFilteredError(GenerationError):
    pass


class IncompleteGenerationError(GenerationError):
    pass


class EmptyGenerationError(GenerationError):
    pass


class StreamProtocolError(LMError):
    pass


class NetworkBlockedError(LMError):
    pass


class MappingError(LangFxError):
    """Model output did not parse or validate. Keeps a bounded copy of the raw response.

    The message is at most ``MAX_MESSAGE_CHARS`` characters (then ``quote_answer`` may add
    a line quoting at most ``MAX_QUOTE_CHARS`` of the answer) and every string inside
    ``detail`` at most ``MAX_DETAIL_CHARS`` (lists at most 50 items), however long the
    identifiers or values of the answer were.

    After ``repair=N``, ``attempts`` holds the error of every attempt in order (this error
    is the last); without repair it is empty.
    """

    MAX_RAW_CHARS = 2000
    MAX_MESSAGE_CHARS = 1000
    MAX_DETAIL_CHARS = 200
    MAX_QUOTE_CHARS = 300

    def __init__(self, message: str, *, raw: str = "", detail: Any = None) -> None:
        self.raw = _cut(raw, self.MAX_RAW_CHARS)
        self.detail = _bounded(detail, self.MAX_DETAIL_CHARS, 0)
        self.attempts: list[MappingError] = []
        self._quoted = False
        super().__init__(_cut(message, self.MAX_MESSAGE_CHARS))

    def quote_answer(self) -> None:
        """Add the start of the model's answer (``raw``, at most ``MAX_QUOTE_CHARS``
        characters, as a Python literal so control characters show escaped) to the
        message, once: an error a person reads says what came back. ``lf.query`` quotes
        the answer of the error it raises; the errors a repair re-asks with do not."""
        if not self.raw or self._quoted:
            return
        self._quoted = True
        cut = len(self.raw) > self.MAX_QUOTE_CHARS
        quote = repr(self.raw[: self.MAX_QUOTE_CHARS]) + (" …" if cut else "")
        self.args = (f"{self.args[0]}\nthe model's answer: {quote}",)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bounded(value: Any, limit: int, depth: int) -> Any:
    """A copy of error detail data with long strings cut and long lists shortened."""
    if isinstance(value, str):
        return _cut(value, limit)
    if depth >= 6:
        return value if value is None or isinstance(value, (bool, int, float)) else "…"
    if isinstance(value, dict):
        return {
            _bounded(k, limit, depth + 1): _bounded(v, limit, depth + 1) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        items = [_bounded(v, limit, depth + 1) for v in value[:50]]
        return type(value)(items) if isinstance(value, list) else tuple(items)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "<a large integer>"
    return value


class InvalidRunStateError(LangFxError, ValueError):
    """A saved ``RunState`` cannot be resumed: malformed JSON, a field of the wrong type, an
    unknown version, pending calls that do not match the model's tool calls in the
    transcript, or a signature that does not match. The message names what is wrong (a
    path such as ``batch[0].args``), never the values or a key. Raised before anything runs."""


class AgentError(LangFxError):
    pass


class ToolDeniedError(AgentError):
    pass


class RunSuspended(AgentError):
    """An agent run stopped to wait for approval decisions (``on_approval="suspend"``);
    ``state`` is its ``RunState``. ``Agent.invoke`` returns the state instead of raising;
    this error is only seen when a suspending agent runs nested inside other work."""

    def __init__(self, message: str, state: Any) -> None:
        super().__init__(message)
        self.state = state


class ToolExecutionError(AgentError):
    """A tool failed, or refused its arguments. For refused arguments ``field_errors``
    says which argument each problem concerns, when the tool's schema knows:
    ``[{"loc": ["guests", 0, "name"], "msg": "..."}]`` (never the values given), so an
    approval prompt can show each problem at its field."""

    def __init__(self, message: str, *, field_errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.field_errors = field_errors


class BudgetExceededError(AgentError):
    """A limit ran out. ``budget`` names it (``max_steps``, ``max_tool_calls``,
    ``max_input_tokens``, ``max_output_tokens``, ``max_total_tokens``, ``max_cost``);
    ``limit`` and ``used`` are the numbers when known."""

    def __init__(
        self,
        message: str,
        *,
        budget: str | None = None,
        limit: float | None = None,
        used: float | None = None,
    ) -> None:
        super().__init__(message)
        self.budget = budget
        self.limit = limit
        self.used = used


class ExecutionTimeoutError(LangFxError, TimeoutError):
    pass


class RunManifestError(LangFxError):
    """A batch's run manifest (``lf.batch(run=...)``) cannot be used: made by another run
    (its identity changed: the message names what) or another result schema (refused, left
    untouched), owned by a run still going, not a manifest, or not writable (a read-only or
    full disk: ``__cause__`` is the ``OSError`` or ``sqlite3`` error). ``path`` is the
    manifest's; ``result`` holds the ``BatchResult`` of what had finished when writing
    failed mid-run (``None`` when nothing ran)."""

    def __init__(self, message: str, *, path: str | None = None, result: Any = None) -> None:
        super().__init__(message)
        self.path = path
        self.result = result


class ProviderBatchError(LangFxError):
    """An item of ``lf.batch(..., engine=lf.engines.ProviderBatch())`` got no usable answer
    from the provider's batch (``failure``: ``errored``, ``expired`` or ``canceled``, after
    its resubmissions), or its ``fn`` did what a batch cannot answer: a second model call
    (an agent, ``repair=``), or a different request than the one collected."""

    def __init__(self, message: str, *, failure: str | None = None) -> None:
        super().__init__(message)
        self.failure = failure


class RayEngineError(LangFxError):
    """``lf.batch(..., engine=lf.engines.Ray())`` cannot run: Ray is not installed, Ray could
    not start or join the cluster (nothing was sent), or a worker died more often than
    ``Ray.max_worker_restarts`` allows."""


class ShippingError(LangFxError, TypeError):
    """A batch's ``fn`` (or the session's model and defaults) or an item cannot be sent to a
    Ray worker: it does not pickle (``__cause__`` says why). ``fn`` is checked before the
    cluster starts and any request is sent; an item when its chunk is sent, so what finished
    before it is kept. ``what`` names it (``fn``, ``item 3``). A result that does not pickle
    fails its item with a ``TypeError`` instead."""

    def __init__(self, message: str, *, what: str = "") -> None:
        super().__init__(message)
        self.what = what
