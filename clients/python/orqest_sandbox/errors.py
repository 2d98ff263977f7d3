"""Typed exceptions of the orqest-sandbox client.

Every exception is a :class:`SandboxError`. It keeps what the server said
about the failure, so a program (or a model) can act on it without parsing
the message:

``stage``
    where the failure happened: ``"transport"`` (the server could not be
    reached, or answered something that is not MCP), ``"auth"`` (the token
    was refused), ``"protocol"`` (a JSON-RPC error), ``"policy"`` (the
    request was refused before anything ran: an argument, a module the
    policy does not allow, a session that is not open), ``"validation"``
    (the static checks rejected the code), ``"execution"`` (the code ran and
    failed), ``"infrastructure"`` (the sandbox itself failed).
``kind``
    for ``"validation"`` and ``"execution"``, the server's ``error_kind``:
    ``validation``, ``timeout``, ``memory``, ``runtime``,
    ``not_serializable``, ``output_limit``, ``invalid_args``, ``killed``.
``classes``
    the server's ``error_classes`` (``invalid_argument``, ``not_found``,
    ``session_not_found``, ``unavailable``, ...).
``field``
    the argument the server named, when it named one.
``result``
    the :class:`~orqest_sandbox.RunResult` of a failed execution (stdout,
    stderr, findings, ...), else ``None``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from .client import Finding, RunResult

__all__ = [
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
]


class SandboxError(Exception):
    """The base class of every error the client raises.

    ``str(err)`` is the server's message; the attributes are described in
    the module's docstring.
    """

    def __init__(
        self,
        message: str,
        *,
        stage: str = "",
        kind: str = "",
        classes: Sequence[str] = (),
        field: str = "",
        result: "Optional[RunResult]" = None,
        structured: Optional[Dict[str, Any]] = None,
        tool: str = "",
    ) -> None:
        super().__init__(message)
        self.message: str = message
        self.stage: str = stage
        self.kind: str = kind
        self.classes: List[str] = list(classes)
        self.field: str = field
        self.result: "Optional[RunResult]" = result
        self.structured: Dict[str, Any] = dict(structured or {})
        self.tool: str = tool

    def __repr__(self) -> str:
        parts = [repr(self.message)]
        for name in ("stage", "kind", "field", "tool"):
            value = getattr(self, name)
            if value:
                parts.append("%s=%r" % (name, value))
        if self.classes:
            parts.append("classes=%r" % (self.classes,))
        return "%s(%s)" % (type(self).__name__, ", ".join(parts))


class SandboxConnectionError(SandboxError):
    """The server could not be reached, or did not answer as an MCP server
    (stage ``"transport"``)."""


class AuthenticationError(SandboxError):
    """The server refused the bearer token (HTTP 401, stage ``"auth"``)."""

    def __init__(self, message: str, *, status: int = 401, **kw: Any) -> None:
        kw.setdefault("stage", "auth")
        super().__init__(message, **kw)
        self.status: int = status


class PermissionDeniedError(AuthenticationError):
    """The server refused the request (HTTP 403, or the
    ``permission_denied`` class)."""


class ProtocolError(SandboxError):
    """A JSON-RPC error response (stage ``"protocol"``): an unknown tool, a
    malformed request, an unsupported protocol version.

    ``code`` is the JSON-RPC error code.
    """

    def __init__(self, message: str, *, code: int = 0, data: Any = None, **kw: Any) -> None:
        kw.setdefault("stage", "protocol")
        super().__init__(message, **kw)
        self.code: int = code
        self.data: Any = data


class InvalidArgumentError(SandboxError):
    """The server refused the request before anything ran (stage
    ``"policy"``): ``field`` names the argument (``allowed_imports`` for a
    module outside the policy, ``timeout_s``, ``session``, ``path``, ...)."""


class NotFoundError(SandboxError):
    """What the request names does not exist: a session that is not open, a
    file that is not in the workspace (classes ``not_found`` /
    ``session_not_found``)."""


class NotSupportedError(SandboxError):
    """The server does not offer this to this client: e.g. files or named
    sessions on a tier without sessions (class ``not_supported``)."""


class ValidationError(SandboxError):
    """The static checks rejected the code before it ran (stage and kind
    ``"validation"``). ``findings`` says which rule, where."""

    @property
    def findings(self) -> "List[Finding]":
        """The validator's findings (rule, message, line, column)."""
        return list(self.result.findings) if self.result is not None else []


class ExecutionError(SandboxError):
    """The code ran and failed (stage ``"execution"``); ``kind`` is the
    server's ``error_kind`` and ``result`` the whole result (stdout and
    stderr included)."""


class SandboxTimeoutError(ExecutionError):
    """The code ran out of its time limit (kind ``"timeout"``)."""


class InfrastructureError(SandboxError):
    """The sandbox itself failed: a plugin that died, a container that would
    not start (stage ``"infrastructure"``). Nothing the code can fix;
    retrying may help."""


def _classify(
    message: str,
    *,
    classes: Sequence[str] = (),
    field: str = "",
    structured: Optional[Dict[str, Any]] = None,
    tool: str = "",
) -> SandboxError:
    """The exception of a tool error result that is not an execution: the
    server's ``stage`` (in the structured content) and error classes decide,
    never the message's text."""
    cs = set(classes)
    stage = str((structured or {}).get("stage") or "")
    kw: Dict[str, Any] = dict(classes=classes, field=field, structured=structured, tool=tool)
    if "permission_denied" in cs:
        return PermissionDeniedError(message, status=0, **kw)
    if "not_supported" in cs:
        return NotSupportedError(message, stage=stage or "policy", **kw)
    if "session_not_found" in cs or "not_found" in cs:
        return NotFoundError(message, stage=stage or "policy", **kw)
    if stage == "infrastructure":
        return InfrastructureError(message, stage=stage, **kw)
    if field or stage in ("policy", "validation") or cs & {"invalid_argument", "validation", "failed_precondition"}:
        return InvalidArgumentError(message, stage=stage or "policy", **kw)
    return InfrastructureError(message, stage=stage or "infrastructure", **kw)
