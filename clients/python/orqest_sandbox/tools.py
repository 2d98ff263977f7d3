"""``run`` as a tool an LLM can call: definitions for the common
tool-calling formats and the handler that runs a call.

>>> tool = PythonTool(Sandbox("http://127.0.0.1:8765", token="..."), allow=["math"])  # doctest: +SKIP
>>> tools = [tool.openai()]        # OpenAI Chat Completions ``tools=``      # doctest: +SKIP
>>> tools = [tool.anthropic()]     # Anthropic Messages ``tools=``          # doctest: +SKIP
>>> reply = tool(call.function.arguments)   # a JSON string or a dict     # doctest: +SKIP

The handler returns text for the model: the result as JSON on success, and
on failure what went wrong (the rule and line of a rejected body, the
traceback of a failed run), so the model can fix its code.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Union

from .errors import SandboxError

if TYPE_CHECKING:  # pragma: no cover
    from .client import Sandbox, Session

__all__ = ["PythonTool"]

DEFAULT_DESCRIPTION = (
    "Run Python in a sandbox. `code` is the body of a function that receives `args` (a dict) "
    "and must `return` a JSON-serialisable value; the value is the result. print() output is "
    "returned too. No network, no files outside the workspace."
)


class PythonTool:
    """The sandbox's ``run`` as one LLM tool.

    ``target`` is a :class:`~orqest_sandbox.Sandbox` or a
    :class:`~orqest_sandbox.Session` (then calls share its workspace and,
    if stateful, its interpreter). ``allow`` and ``timeout`` apply to every
    call; the allowed modules are named in the description so the model
    knows what it may import.
    """

    def __init__(
        self,
        target: "Union[Sandbox, Session]",
        *,
        name: str = "run_python",
        description: Optional[str] = None,
        allow: Optional[Iterable[str]] = None,
        timeout: Optional[float] = None,
    ) -> None:
        self.target = target
        self.name = name
        self.allow: Optional[List[str]] = list(allow) if allow is not None else None
        self.timeout = timeout
        desc = description or DEFAULT_DESCRIPTION
        if self.allow:
            desc += " Modules it may import: " + ", ".join(self.allow) + "."
        elif self.allow is not None:
            desc += " It may import no modules."
        self.description = desc

    @property
    def parameters(self) -> Dict[str, Any]:
        """The JSON Schema of the tool's arguments."""
        return {
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": "the body of a Python function receiving `args`; `return` the result",
                },
                "args": {"type": "object", "description": "the args dict passed to the code (default {})"},
            },
            "required": ["code"],
            "additionalProperties": False,
        }

    def openai(self) -> Dict[str, Any]:
        """The OpenAI Chat Completions tool definition
        (``{"type": "function", "function": {...}}``)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def openai_responses(self) -> Dict[str, Any]:
        """The OpenAI Responses API tool definition (flat function tool)."""
        return {"type": "function", "name": self.name, "description": self.description, "parameters": self.parameters}

    def anthropic(self) -> Dict[str, Any]:
        """The Anthropic Messages API tool definition
        (``{"name", "description", "input_schema"}``)."""
        return {"name": self.name, "description": self.description, "input_schema": self.parameters}

    def mcp(self) -> Dict[str, Any]:
        """An MCP tool definition (``{"name", "description", "inputSchema"}``)."""
        return {"name": self.name, "description": self.description, "inputSchema": self.parameters}

    def definition(self, fmt: str = "openai") -> Dict[str, Any]:
        """The definition in format ``fmt``: ``openai``, ``openai_responses``,
        ``anthropic`` or ``mcp``."""
        makers = {"openai": self.openai, "openai_responses": self.openai_responses, "anthropic": self.anthropic, "mcp": self.mcp}
        if fmt not in makers:
            raise ValueError("format %r: one of %s" % (fmt, ", ".join(sorted(makers))))
        return makers[fmt]()

    def __call__(self, arguments: "Union[str, Mapping[str, Any], None]") -> str:
        """Runs one tool call (its arguments as the model sent them: a JSON
        string or a dict) and returns the text to send back to the model.
        Errors the model can act on come back as text, not exceptions;
        only a server that cannot be reached or refuses the token raises."""
        try:
            a = json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})
        except ValueError as e:
            return "error: the arguments are not valid JSON: %s" % e
        if not isinstance(a, dict) or not isinstance(a.get("code"), str) or not a["code"].strip():
            return "error: give `code`, the body of a Python function, as a string"
        args = a.get("args")
        if args is not None and not isinstance(args, dict):
            return "error: `args` must be an object"
        from .errors import AuthenticationError, SandboxConnectionError

        try:
            res = self.target.run(a["code"], args, allow=self.allow, timeout=self.timeout)
        except (AuthenticationError, SandboxConnectionError):
            raise
        except SandboxError as e:
            return self._error_text(e)
        out: Dict[str, Any] = {"result": res.output}
        if res.stdout:
            out["stdout"] = res.stdout
        if res.stderr:
            out["stderr"] = res.stderr
        return json.dumps(out)

    @staticmethod
    def _error_text(e: SandboxError) -> str:
        lines = ["error (%s%s): %s" % (e.stage or "sandbox", ", " + e.kind if e.kind and e.kind != e.stage else "", e.message)]
        r = e.result
        if r is not None:
            for f in r.findings:
                lines.append("  " + str(f))
            if r.stdout:
                lines.append("stdout:\n" + r.stdout)
            if r.stderr and r.stderr not in e.message:
                lines.append("stderr:\n" + r.stderr)
        return "\n".join(lines)

    def handles(self, name: str) -> bool:
        """Whether a tool call named ``name`` is this tool's."""
        return name == self.name
