"""langfx_nb: typed, traceable language-model programs, with live Jupyter widgets.

``import langfx_nb as lf``; the whole public API is re-exported here once. The notebook layer
(``lf.nb``), evaluation (``lf.eval``; not in ``__all__``, so a star import never shadows the
builtin ``eval``), the OpenTelemetry export (``lf.otel``) and the provider adapters
(``lf.llms.*`` model classes) are imported on first use; in a Jupyter kernel the notebook layer
is imported with the package (see the end of this module).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import llms
from .batch import BatchResult
from .errors import (
    AgentError,
    AuthenticationError,
    BudgetExceededError,
    ContentFilteredError,
    ContextLengthError,
    EmptyGenerationError,
    ExecutionTimeoutError,
    GenerationError,
    IncompleteGenerationError,
    InvalidRequestError,
    InvalidRunStateError,
    LangFxError,
    LMError,
    MappingError,
    NetworkBlockedError,
    ProviderBatchError,
    RateLimitError,
    RayEngineError,
    RetryableError,
    RunManifestError,
    RunSuspended,
    ServerError,
    ShippingError,
    StreamProtocolError,
    TemplateError,
    ToolDeniedError,
    ToolExecutionError,
    UnsupportedCapabilityError,
)
from .llms import LanguageModel, SamplingOptions, SamplingResult, StreamChunk
from .llms.default import default_lm, set_default_lm
from .llms.ratelimit import RateLimit
from .llms.streaming import ToolCallDelta, ToolCallEnd, ToolCallStart
from .messages import (
    AIMessage,
    ComplexMessage,
    Message,
    ReasoningPart,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from .modalities import PDF, Audio, Image, Mime, Video
from .structured.mapping import Mapping, MappingExample
from .structured.query import query
from .template import LangFunc, Template

if TYPE_CHECKING:
    from .batch import batch
else:  # the package, which calls the function when called (langfx_nb/batch/__init__.py)
    from . import batch

if TYPE_CHECKING:  # loaded on first use (see __getattr__); listed here for type checkers
    from . import engines as engines
    from . import eval as eval
    from .agentic import (
        Action,
        Agent,
        AgentLimits,
        Approve,
        Budget,
        Deny,
        Price,
        Prices,
        RunState,
        Session,
        Tool,
        TraceNode,
        UsageSummary,
        tool,
    )
    from .agentic import otel as otel
    from .agentic.trace_db import save_trace as save_trace
    from .structured.events import (
        ArrayEnd,
        ArrayStart,
        Cancelled,
        FieldEnd,
        FieldStart,
        GenerationComplete,
        GenerationFailed,
        ObjectEnd,
        ObjectStart,
        ParsingFailed,
        StreamEvent,
        StringFieldDelta,
    )
    from .structured.query_stream import query_stream
    from .structured.stream_parser import StreamParseError, StreamParser

__version__ = "0.1.0"

# Each area appends its names below; keep the list sorted (a test checks it is complete).
__all__ = [
    "PDF",
    "AIMessage",
    "Action",
    "Agent",
    "AgentError",
    "AgentLimits",
    "Approve",
    "ArrayEnd",
    "ArrayStart",
    "Audio",
    "AuthenticationError",
    "BatchResult",
    "Budget",
    "BudgetExceededError",
    "Cancelled",
    "ComplexMessage",
    "ContentFilteredError",
    "ContextLengthError",
    "Deny",
    "EmptyGenerationError",
    "ExecutionTimeoutError",
    "FieldEnd",
    "FieldStart",
    "GenerationComplete",
    "GenerationError",
    "GenerationFailed",
    "Image",
    "IncompleteGenerationError",
    "InvalidRequestError",
    "InvalidRunStateError",
    "LMError",
    "LangFunc",
    "LangFxError",
    "LanguageModel",
    "Mapping",
    "MappingError",
    "MappingExample",
    "Message",
    "Mime",
    "NetworkBlockedError",
    "ObjectEnd",
    "ObjectStart",
    "ParsingFailed",
    "Price",
    "Prices",
    "ProviderBatchError",
    "RateLimit",
    "RateLimitError",
    "RayEngineError",
    "ReasoningPart",
    "RetryableError",
    "RunManifestError",
    "RunState",
    "RunSuspended",
    "SamplingOptions",
    "SamplingResult",
    "ServerError",
    "Session",
    "ShippingError",
    "StreamChunk",
    "StreamEvent",
    "StreamParseError",
    "StreamParser",
    "StreamProtocolError",
    "StringFieldDelta",
    "SystemMessage",
    "Template",
    "TemplateError",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolDeniedError",
    "ToolExecutionError",
    "ToolMessage",
    "TraceNode",
    "UnsupportedCapabilityError",
    "Usage",
    "UsageSummary",
    "UserMessage",
    "Video",
    "batch",
    "default_lm",
    "llms",
    "query",
    "query_stream",
    "save_trace",
    "set_default_lm",
    "tool",
]


# Agents, sessions and streaming parse machinery cost ~90 ms to import; a plain
# `lf.query` user should not pay for them, so they load on first attribute access.
_LAZY = {
    "Action": ".agentic",
    "Agent": ".agentic",
    "AgentLimits": ".agentic",
    "Approve": ".agentic",
    "Budget": ".agentic",
    "Deny": ".agentic",
    "Price": ".agentic",
    "Prices": ".agentic",
    "RunState": ".agentic",
    "Session": ".agentic",
    "Tool": ".agentic",
    "TraceNode": ".agentic",
    "UsageSummary": ".agentic",
    "tool": ".agentic",
    "save_trace": ".agentic.trace_db",
    "ArrayEnd": ".structured.events",
    "ArrayStart": ".structured.events",
    "Cancelled": ".structured.events",
    "FieldEnd": ".structured.events",
    "FieldStart": ".structured.events",
    "GenerationComplete": ".structured.events",
    "GenerationFailed": ".structured.events",
    "ObjectEnd": ".structured.events",
    "ObjectStart": ".structured.events",
    "ParsingFailed": ".structured.events",
    "StreamEvent": ".structured.events",
    "StringFieldDelta": ".structured.events",
    "query_stream": ".structured.query_stream",
    "StreamParseError": ".structured.stream_parser",
    "StreamParser": ".structured.stream_parser",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name == "nb":  # the notebook layer imports IPython/ipywidgets: only on first access
        return importlib.import_module(".notebook", __name__)
    if name == "mcp":  # MCP servers as tools; the optional `mcp` package loads on use
        return importlib.import_module(".agentic.mcp", __name__)
    if name == "engines":  # lf.engines.ProviderBatch, ...
        return importlib.import_module(".engines", __name__)
    if name == "eval":  # evaluation (datasets, evaluators, reports); loads on first use
        return importlib.import_module(".eval", __name__)
    if name == "otel":  # OpenTelemetry export (optional extra); opentelemetry loads on export()
        return importlib.import_module(".agentic.otel", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext langfx_nb``: register the magics and rich displays."""
    from .notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext langfx_nb``: remove the ``%%lf`` input transformer and magics."""
    from .notebook import unload_ipython_extension as unload

    unload(ipython)


def _in_jupyter_kernel() -> bool:
    """True when this import runs in a Jupyter kernel or a marimo notebook's (not terminal
    IPython, not a script)."""
    import sys

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if getattr(shell, "kernel", None) is not None:
        return True
    marimo = sys.modules.get("marimo")
    try:
        return marimo is not None and bool(marimo.running_in_notebook())
    except Exception:
        return False


# In a Jupyter kernel the notebook layer loads with the package, so a batch shows its live
# view and a report its widget after a plain ``import langfx_nb as lf`` (SPEC: "in a notebook
# a batch shows a live progress view"). Without the ``notebook`` extra nothing is shown.
if _in_jupyter_kernel():
    import contextlib
    import importlib

    with contextlib.suppress(ImportError):
        importlib.import_module(".notebook", __name__)
