"""orqest-sandbox: run LLM-generated Python on an ``orqest-sandbox mcp
serve --http`` server.

>>> from orqest_sandbox import Sandbox                              # doctest: +SKIP
>>> with Sandbox("http://127.0.0.1:8765", token="...") as sb:        # doctest: +SKIP
...     print(sb.run("return sum(args['xs'])", {"xs": [1, 2, 3]}).output)
6

Standard library only; Python 3.9 or newer.
"""

from .client import (
    Artifact,
    FileInfo,
    Files,
    Finding,
    RunResult,
    Sandbox,
    Session,
    SessionInfo,
    __version__,
)
from .errors import (
    AuthenticationError,
    ExecutionError,
    InfrastructureError,
    InvalidArgumentError,
    NotFoundError,
    NotSupportedError,
    PermissionDeniedError,
    ProtocolError,
    SandboxConnectionError,
    SandboxError,
    SandboxTimeoutError,
    ValidationError,
)
from .tools import PythonTool

__all__ = [
    "Sandbox",
    "Session",
    "Files",
    "RunResult",
    "Artifact",
    "Finding",
    "FileInfo",
    "SessionInfo",
    "PythonTool",
    "SandboxError",
    "SandboxConnectionError",
    "AuthenticationError",
    "PermissionDeniedError",
    "ProtocolError",
    "InvalidArgumentError",
    "NotFoundError",
    "NotSupportedError",
    "ValidationError",
    "ExecutionError",
    "SandboxTimeoutError",
    "InfrastructureError",
    "__version__",
]
