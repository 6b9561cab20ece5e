"""ctx-client: a typed Python client for ctx, a git for AI-agent context.

``Client`` (blocking) and ``AsyncClient`` (asyncio) have one method per
operation of the HTTP API, named by its operationId; an error raises the
:class:`CtxError` subclass of its kind; 503 and 429 are retried honouring
``Retry-After``. ``Embedded`` and ``AsyncEmbedded`` are the same clients
over a data directory opened in this process, with no server (ctx's
native module: ``pip install ./clients/python/native``).

Framework adapters live in submodules and need the matching extra:
``ctx_client.claude`` (``[claude]``: the Claude Agent SDK's SessionStore),
``ctx_client.openai_agents`` (``[openai]``: the OpenAI Agents SDK's Session),
``ctx_client.langgraph`` (``[langgraph]``: LangGraph checkpoint savers),
``ctx_client.adk`` (``[adk]``: Google ADK's SessionService).
"""

from ._core import VERSION as __version__
from ._core import RetryPolicy
from ._routes import UNSET
from .client import AsyncClient, Client
from .embedded import AsyncEmbedded, Embedded
from .errors import (
    ConflictError,
    CtxError,
    GoneError,
    InternalError,
    InvalidError,
    NotFoundError,
    RateLimitedError,
    TooLargeError,
    UnauthenticatedError,
    UnavailableError,
)

__all__ = [
    "__version__",
    "UNSET",
    "AsyncClient",
    "AsyncEmbedded",
    "Client",
    "Embedded",
    "ConflictError",
    "GoneError",
    "CtxError",
    "InternalError",
    "InvalidError",
    "NotFoundError",
    "RateLimitedError",
    "RetryPolicy",
    "TooLargeError",
    "UnauthenticatedError",
    "UnavailableError",
]
