"""The orqest-sandbox client: :class:`Sandbox`, :class:`Session`,
:class:`RunResult`."""

from __future__ import annotations

import base64
import json
import os
import ssl
import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Union

from . import _mcp
from .errors import (
    ExecutionError,
    InvalidArgumentError,
    NotSupportedError,
    SandboxError,
    SandboxTimeoutError,
    ValidationError,
    _classify,
)

if TYPE_CHECKING:  # pragma: no cover
    from .tools import PythonTool

__all__ = ["Sandbox", "Session", "Files", "RunResult", "Artifact", "Finding", "FileInfo", "SessionInfo"]

#: The client's version (also sent as the MCP clientInfo).
__version__ = "0.1.0"

ADDR_ENV = "ORQEST_ADDR"
TOKEN_ENV = "ORQEST_TOKEN"
CACERT_ENV = "ORQEST_CACERT"
STREAM_META = "orqest/stream"
#: Seconds a run without a timeout of its own waits for the server (the
#: policy's timeout bounds it there).
RUN_WAIT = 600.0

OutputCallback = Callable[[str], None]


@dataclass(frozen=True)
class Finding:
    """A static-check finding: which rule, where, on what text."""

    rule: str
    message: str
    line: int = 0
    column: int = 0
    snippet: str = ""

    def __str__(self) -> str:
        s = "%d:%d: %s: %s" % (self.line, self.column, self.rule, self.message)
        return s + (" (%r)" % self.snippet if self.snippet else "")


@dataclass(frozen=True)
class Artifact:
    """A file a run created or changed in its session's workspace (or a
    matplotlib figure it left open, as PNG). ``data`` is None when the
    server left the bytes out (``omitted``: over its caps); read them with
    ``session.files.read(artifact.name)``."""

    name: str
    mime_type: str = ""
    size: int = 0
    data: Optional[bytes] = None
    omitted: bool = False

    def save(self, path: str) -> None:
        """Writes the artifact's bytes to a local file."""
        if self.data is None:
            raise ValueError("artifact %s was omitted by the server: read it with files.read" % self.name)
        with open(path, "wb") as f:
            f.write(self.data)

    @property
    def text(self) -> str:
        """The bytes as UTF-8 text."""
        return (self.data or b"").decode("utf-8")


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run: what the server's ExecutionResult says.

    ``output`` is the code's return value (decoded JSON); ``stdout`` and
    ``stderr`` hold all the output (also what was streamed to the
    callbacks)."""

    success: bool
    output: Any = None
    stdout: str = ""
    stderr: str = ""
    error: str = ""
    error_kind: str = ""
    duration_ms: float = 0.0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    state_lost: bool = False
    findings: List[Finding] = field(default_factory=list)
    artifacts: List[Artifact] = field(default_factory=list)
    limits: Dict[str, Any] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def text(self) -> str:
        """The output as JSON text (what a model would read)."""
        return json.dumps(self.output)

    @classmethod
    def from_structured(cls, st: Mapping[str, Any]) -> "RunResult":
        """A RunResult from the server's structured content."""
        arts = []
        for a in st.get("artifacts") or []:
            data = a.get("data")
            arts.append(
                Artifact(
                    name=a.get("name", ""),
                    mime_type=a.get("mime_type", ""),
                    size=int(a.get("size") or 0),
                    data=base64.b64decode(data) if isinstance(data, str) else None,
                    omitted=bool(a.get("omitted")),
                )
            )
        finds = [
            Finding(
                rule=f.get("rule", ""),
                message=f.get("message", ""),
                line=int(f.get("line") or 0),
                column=int(f.get("column") or 0),
                snippet=f.get("snippet", ""),
            )
            for f in st.get("findings") or []
        ]
        return cls(
            success=bool(st.get("success")),
            output=st.get("output"),
            stdout=st.get("stdout") or "",
            stderr=st.get("stderr") or "",
            error=st.get("error") or "",
            error_kind=st.get("error_kind") or "",
            duration_ms=float(st.get("duration_ms") or 0),
            stdout_truncated=bool(st.get("stdout_truncated")),
            stderr_truncated=bool(st.get("stderr_truncated")),
            state_lost=bool(st.get("state_lost")),
            findings=finds,
            artifacts=arts,
            limits=dict(st.get("limits") or {}),
            raw=dict(st),
        )


@dataclass(frozen=True)
class FileInfo:
    """A file of a session's workspace."""

    name: str
    size: int = 0
    mode: int = 0
    mod_time: str = ""


@dataclass(frozen=True)
class SessionInfo:
    """One of the client's sessions on the server (``list_sessions``);
    ``name`` is "" for the client's default session."""

    name: str
    id: str
    state: str
    default: bool = False
    reason: str = ""
    idle_for_s: float = 0.0
    in_call: int = 0
    opened: str = ""
    last_used: str = ""


def _text_of(res: Mapping[str, Any]) -> str:
    return "\n".join(c.get("text", "") for c in res.get("content") or [] if c.get("type") == "text")


def _read_token(token: Optional[str], token_file: Optional[str]) -> str:
    src = "token"
    if token is None and token_file:
        with open(token_file, encoding="utf-8") as f:
            token, src = f.read(), "token_file " + token_file
    if token is None:
        token, src = os.environ.get(TOKEN_ENV, ""), "$" + TOKEN_ENV
    token = token.strip()
    if not token:
        raise ValueError("no token: give token=, token_file= or set $%s" % TOKEN_ENV)
    if any(c.isspace() for c in token):
        raise ValueError(
            "%s: want one bare token (the server's token file has NAME TOKEN lines; a client's holds only its TOKEN)"
            % src
        )
    return token


class Sandbox:
    """A client of an ``orqest-sandbox mcp serve --http`` server.

    >>> sb = Sandbox("http://127.0.0.1:8765", token="...")   # doctest: +SKIP
    >>> sb.run("return 6 * 7").output                       # doctest: +SKIP
    42

    ``address`` defaults to ``$ORQEST_ADDR``; the token is ``token``, else
    the contents of ``token_file``, else ``$ORQEST_TOKEN`` (as the CLI's
    ``--token-file``). For an https server with a private CA give
    ``ca_cert`` (a PEM file; default ``$ORQEST_CACERT``) or a whole
    ``ssl_context``. ``timeout`` is the HTTP timeout in seconds for a
    request that runs no code; a run waits for its own ``timeout`` plus a
    margin. The MCP session opens at the first call; :meth:`close` (or a
    ``with`` block) ends it.
    """

    def __init__(
        self,
        address: Optional[str] = None,
        token: Optional[str] = None,
        *,
        token_file: Optional[str] = None,
        ca_cert: Optional[str] = None,
        ssl_context: Optional[ssl.SSLContext] = None,
        timeout: float = 60.0,
    ) -> None:
        address = address or os.environ.get(ADDR_ENV, "")
        if not address:
            raise ValueError(
                "no server: give the address (e.g. http://127.0.0.1:8765) or set $%s" % ADDR_ENV
            )
        self.endpoint: str = _mcp.endpoint_of(address)
        ca_cert = ca_cert or os.environ.get(CACERT_ENV) or None
        if ssl_context is None and ca_cert:
            ssl_context = ssl.create_default_context(cafile=ca_cert)
        self.timeout = timeout
        self._conn = _mcp.MCPConnection(
            self.endpoint,
            _read_token(token, token_file),
            ssl_context=ssl_context,
            timeout=timeout,
            client_version=__version__,
        )
        self._tools: Optional[Dict[str, Dict[str, Any]]] = None
        self._tools_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Ends the MCP session. The server's sandbox sessions stay (close
        them with :meth:`Session.close` or :meth:`close_session`)."""
        self._conn.close()

    def connect(self) -> "Sandbox":
        """Opens the MCP session now (else at the first call): a wrong
        address or token fails here."""
        self.tools()
        return self

    @property
    def protocol_version(self) -> Optional[str]:
        """The MCP protocol revision the server agreed to (after connect)."""
        return self._conn.protocol_version

    # -- tools ---------------------------------------------------------

    def tools(self, refresh: bool = False) -> Dict[str, Dict[str, Any]]:
        """The tools the server offers this client, by name (MCP tool
        definitions: name, description, inputSchema)."""
        with self._tools_lock:
            if self._tools is None or refresh:
                tools: Dict[str, Dict[str, Any]] = {}
                cursor: Optional[str] = None
                while True:
                    res = self._conn.request("tools/list", {"cursor": cursor} if cursor else {})
                    for t in res.get("tools") or []:
                        tools[t["name"]] = t
                    cursor = res.get("nextCursor")
                    if not cursor:
                        break
                self._tools = tools
            return dict(self._tools)

    def _require(self, tool: str, what: str) -> None:
        tools = self.tools()
        if tool not in tools:
            tools = self.tools(refresh=True)
        if tool not in tools:
            raise NotSupportedError(
                "the server at %s offers no %s to this client (%s)" % (self.endpoint, tool, what),
                stage="policy",
                classes=["not_supported"],
                tool=tool,
            )

    def call_tool(
        self,
        name: str,
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        on_stdout: Optional[OutputCallback] = None,
        on_stderr: Optional[OutputCallback] = None,
        timeout: Optional[float] = None,
    ) -> Dict[str, Any]:
        """Calls an MCP tool and returns its raw result (content,
        structuredContent, isError). Output the tool streams goes to
        on_stdout / on_stderr as it is written."""
        params: Dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        handler = None
        if on_stdout is not None or on_stderr is not None:
            token = "py-" + uuid.uuid4().hex
            params["_meta"] = {"progressToken": token}

            def handler(n: Dict[str, Any]) -> None:
                if n.get("method") != "notifications/progress":
                    return
                p = n.get("params") or {}
                if p.get("progressToken") != token:
                    return
                stream = (p.get("_meta") or {}).get(STREAM_META)
                cb = on_stdout if stream == "stdout" else on_stderr if stream == "stderr" else None
                if cb is not None and p.get("message"):
                    cb(p["message"])

        return self._conn.request("tools/call", params, on_notification=handler, timeout=timeout)

    def _call(self, name: str, arguments: Mapping[str, Any], **kw: Any) -> Dict[str, Any]:
        """call_tool that raises the typed error of a tool error result."""
        res = self.call_tool(name, arguments, **kw)
        st = res.get("structuredContent")
        if not res.get("isError"):
            return st if isinstance(st, dict) else {"text": _text_of(res)}
        st = st if isinstance(st, dict) else {}
        raise _classify(
            _text_of(res) or st.get("error", "") or "%s failed" % name,
            classes=st.get("error_classes") or [],
            field=st.get("field") or "",
            structured=st,
            tool=name,
        )

    # -- running code --------------------------------------------------

    def run(
        self,
        code: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        allow: Optional[Iterable[str]] = None,
        timeout: Optional[float] = None,
        on_stdout: Optional[OutputCallback] = None,
        on_stderr: Optional[OutputCallback] = None,
        stateful: Optional[bool] = None,
        session: Optional[str] = None,
        dependencies: Optional[Iterable[str]] = None,
        check: bool = True,
    ) -> RunResult:
        """Runs ``code``, the body of a function that receives ``args`` (a
        dict) and ``return``\\ s a JSON-serialisable value.

        ``allow`` lists modules the code imports beyond the policy's own
        ``allowed_imports``, which need no listing (within the policy's
        ceiling), ``timeout`` the seconds it may take (at most the policy's
        ceiling; default the policy's timeout), ``dependencies`` packages
        (``name`` or ``name==version``) to install from the operator's wheel
        directory first (within the policy's ``allowed_packages``, on session
        tiers that install them), ``on_stdout``/``on_stderr`` receive its
        output as it is written. ``session`` names one of this client's sessions (see
        :meth:`session`), ``stateful`` asks for the session's interpreter
        (top-level names persist, like notebook cells).

        Raises :class:`ValidationError` when the static checks reject the
        code, :class:`ExecutionError` (:class:`SandboxTimeoutError` for a
        timeout) when it fails and ``check`` is true (else the result has
        ``success`` false), :class:`InvalidArgumentError` when the request
        is refused (e.g. a module outside the policy).
        """
        arguments: Dict[str, Any] = {"code": code}
        if args is not None:
            arguments["args"] = dict(args)
        if allow is not None:
            arguments["allowed_imports"] = list(allow)
        if timeout is not None:
            arguments["timeout_s"] = float(timeout)
        if dependencies is not None:
            arguments["dependencies"] = list(dependencies)
        if stateful is not None:
            arguments["stateful"] = bool(stateful)
        if session:
            arguments["session"] = session
        res = self.call_tool(
            "run_python", arguments, on_stdout=on_stdout, on_stderr=on_stderr, timeout=self._run_wait(timeout)
        )
        return self._result("run_python", res, check)

    def _run_wait(self, timeout: Optional[float]) -> float:
        """How long a run's stream may stay silent: its own timeout plus a
        margin, else (the policy's timeout applies, unknown here) at least
        RUN_WAIT seconds."""
        if timeout is not None:
            return max(self.timeout, float(timeout) + 30.0)
        return max(self.timeout, RUN_WAIT)

    def _result(self, tool: str, res: Mapping[str, Any], check: bool) -> RunResult:
        st = res.get("structuredContent")
        if not isinstance(st, dict) or "success" not in st:
            if res.get("isError"):
                st = st if isinstance(st, dict) else {}
                raise _classify(
                    _text_of(res) or st.get("error", "") or "%s failed" % tool,
                    classes=st.get("error_classes") or [],
                    field=st.get("field") or "",
                    structured=st,
                    tool=tool,
                )
            # A tool that returns no execution result (e.g. a spawned tool
            # of an older server): its text as the output.
            text = _text_of(res)
            try:
                out = json.loads(text)
            except ValueError:
                out = text
            return RunResult(success=True, output=out, raw=dict(res))
        result = RunResult.from_structured(st)
        if result.success:
            return result
        kind = result.error_kind
        msg = _text_of(res).split("\nstdout:\n")[0] or result.error or "execution failed"
        if kind == "validation":
            raise ValidationError(msg, stage="validation", kind=kind, result=result, structured=st, tool=tool)
        if not check:
            return result
        cls = SandboxTimeoutError if kind == "timeout" else ExecutionError
        raise cls(msg, stage="execution", kind=kind, result=result, structured=st, tool=tool)

    def session(
        self, name: Optional[str] = None, *, stateful: Optional[bool] = None, close: bool = True
    ) -> "Session":
        """A named session of this client on the server: its own workspace
        (``files``) and, with ``stateful=True``, its own interpreter whose
        top-level names persist across runs. Use it as a context manager:
        the session is closed (its files and state gone) when the block
        ends, unless ``close=False``. Without a name a fresh one is made;
        the same name from another process with the same token is the same
        session. Needs a session tier (e.g. docker)."""
        return Session(self, name or "py-" + uuid.uuid4().hex[:12], stateful=stateful, close=close)

    def sessions(self) -> List[SessionInfo]:
        """This client's sessions on the server (``list_sessions``)."""
        self._require("list_sessions", "its sandbox keeps no sessions")
        st = self._call("list_sessions", {})
        out = []
        for s in st.get("sessions") or []:
            out.append(
                SessionInfo(
                    name=s.get("name", ""),
                    id=s.get("id", ""),
                    state=s.get("state", ""),
                    default=bool(s.get("default")),
                    reason=s.get("reason", ""),
                    idle_for_s=float(s.get("idle_for_s") or 0),
                    in_call=int(s.get("in_call") or 0),
                    opened=s.get("opened", ""),
                    last_used=s.get("last_used", ""),
                )
            )
        return out

    def close_session(self, name: str) -> None:
        """Ends the named session: its workspace and interpreter are gone."""
        self._require("close_session", "its sandbox keeps no sessions")
        self._call("close_session", {"session": name})

    def pause_session(self, name: str) -> Dict[str, Any]:
        """Pauses the named session (``pause_session``): the server saves it
        to disk and it holds no CPU and no memory until
        :meth:`resume_session` or its next call. Returns what was saved
        (``memory``: with its interpreters' memory; ``bytes``; ``not_kept``).
        A sandbox that cannot pause raises :class:`NotSupportedError`; a
        session running a call raises an error whose ``classes`` hold
        ``session_busy`` (nothing changed)."""
        self._require("pause_session", "its sandbox keeps no sessions")
        return self._call("pause_session", {"session": name})

    def resume_session(self, name: str) -> Dict[str, Any]:
        """Resumes the named paused session (``resume_session``); returns
        ``state_lost`` and, when it is true, ``not_kept``."""
        self._require("resume_session", "its sandbox keeps no sessions")
        return self._call("resume_session", {"session": name})

    # -- spawned tools -------------------------------------------------

    def spawn_tool(
        self,
        name: str,
        implementation: str,
        *,
        description: str = "",
        parameters: Optional[Mapping[str, Any]] = None,
        allow: Optional[Iterable[str]] = None,
        timeout: Optional[float] = None,
    ) -> Dict[str, Any]:
        """Creates a tool from Python (``spawn_tool``): ``implementation``
        is the body of a function receiving ``args``; ``parameters`` a JSON
        Schema (or a map of name to schema). Returns the server's
        description of the tool (name, input_schema, ...); call it with
        :meth:`call`."""
        a: Dict[str, Any] = {"name": name, "implementation": implementation}
        if description:
            a["description"] = description
        if parameters is not None:
            a["parameters"] = dict(parameters)
        if allow is not None:
            a["allowed_imports"] = list(allow)
        if timeout is not None:
            a["timeout_s"] = float(timeout)
        res = self.call_tool("spawn_tool", a)
        st = res.get("structuredContent")
        if res.get("isError"):
            st = st if isinstance(st, dict) else {}
            if st.get("findings"):
                result = RunResult.from_structured({"success": False, "error_kind": "validation", "findings": st["findings"]})
                raise ValidationError(_text_of(res), stage="validation", kind="validation", result=result, structured=st, tool="spawn_tool")
            raise _classify(_text_of(res), classes=st.get("error_classes") or [], field=st.get("field") or "", structured=st, tool="spawn_tool")
        with self._tools_lock:
            self._tools = None
        return st if isinstance(st, dict) else {}

    def call(
        self,
        tool: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        on_stdout: Optional[OutputCallback] = None,
        on_stderr: Optional[OutputCallback] = None,
        timeout: Optional[float] = None,
        check: bool = True,
    ) -> RunResult:
        """Calls a spawned (or library) tool with its arguments; errors as
        :meth:`run` (``timeout``: how long to wait, default as run's)."""
        res = self.call_tool(
            tool, dict(args or {}), on_stdout=on_stdout, on_stderr=on_stderr, timeout=self._run_wait(timeout)
        )
        return self._result(tool, res, check)

    @property
    def files(self) -> "Files":
        """The workspace of this client's default session (the one
        :meth:`run` without ``session`` uses), on a session tier."""
        return Files(self, None)

    def as_tool(self, **kw: Any) -> "PythonTool":
        """``run`` as an LLM tool (see :class:`orqest_sandbox.tools.PythonTool`)."""
        from .tools import PythonTool

        return PythonTool(self, **kw)


class Files:
    """The workspace of a session: ``write``, ``read``, ``read_text``,
    ``list``. Paths are relative to the workspace (``data.csv``,
    ``out/chart.png``); code reads them as ``workspace.read_text(path)``."""

    def __init__(self, sandbox: Sandbox, session: Optional[str]) -> None:
        self._sb = sandbox
        self._session = session

    def _args(self, **kw: Any) -> Dict[str, Any]:
        if self._session:
            kw["session"] = self._session
        return kw

    def write(self, path: str, data: Union[str, bytes]) -> FileInfo:
        """Writes ``data`` (text as UTF-8, or bytes) to ``path``, opening the
        session if needed. Returns the file's info."""
        self._sb._require("put_file", "its sandbox has no workspace")
        a = self._args(path=path)
        if isinstance(data, str):
            a["text"] = data
        else:
            a["base64"] = base64.b64encode(bytes(data)).decode("ascii")
        st = self._sb._call("put_file", a)
        f = st.get("File") or st.get("file") or {}
        return _file_info(f) if f else FileInfo(name=path, size=len(data))

    def upload(self, local_path: str, path: Optional[str] = None) -> FileInfo:
        """Writes a local file into the workspace (as ``path``, default its
        base name)."""
        with open(local_path, "rb") as f:
            return self.write(path or os.path.basename(local_path), f.read())

    def read(self, path: str) -> bytes:
        """The bytes of the workspace file ``path``."""
        self._sb._require("get_file", "its sandbox has no workspace")
        st = self._sb._call("get_file", self._args(path=path))
        if "base64" in st:
            return base64.b64decode(st["base64"])
        return str(st.get("text", "")).encode("utf-8")

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """The workspace file ``path`` as text."""
        return self.read(path).decode(encoding)

    def download(self, path: str, local_path: str) -> None:
        """Copies the workspace file ``path`` to ``local_path``."""
        data = self.read(path)
        with open(local_path, "wb") as f:
            f.write(data)

    def list(self, path: str = "") -> List[FileInfo]:
        """The files of the workspace (under ``path`` when given)."""
        self._sb._require("list_files", "its sandbox has no workspace")
        a = self._args()
        if path:
            a["path"] = path
        st = self._sb._call("list_files", a)
        return [_file_info(f) for f in st.get("Files") or st.get("files") or []]


def _file_info(f: Mapping[str, Any]) -> FileInfo:
    return FileInfo(
        name=f.get("name", ""), size=int(f.get("size") or 0), mode=int(f.get("mode") or 0), mod_time=f.get("mod_time", "")
    )


class Session:
    """A named session of the client on the server (see
    :meth:`Sandbox.session`). ``run`` runs in it; ``files`` is its
    workspace; ``artifacts`` are the files the runs so far created or
    changed, latest last."""

    def __init__(self, sandbox: Sandbox, name: str, *, stateful: Optional[bool] = None, close: bool = True) -> None:
        if not name or len(name) > 64 or not (name[0].isalnum() and name.replace("_", "").replace("-", "").isalnum()) or not name.isascii():
            raise InvalidArgumentError(
                "session name %r: a letter or digit, then up to 63 letters, digits, _ or -" % (name,),
                stage="policy",
                field="session",
            )
        self.sandbox = sandbox
        self.name = name
        self.stateful = stateful
        self._close = close
        self.files = Files(sandbox, name)
        self.artifacts: List[Artifact] = []

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._close:
            self.close()

    def run(
        self,
        code: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        allow: Optional[Iterable[str]] = None,
        timeout: Optional[float] = None,
        on_stdout: Optional[OutputCallback] = None,
        on_stderr: Optional[OutputCallback] = None,
        stateful: Optional[bool] = None,
        dependencies: Optional[Iterable[str]] = None,
        check: bool = True,
    ) -> RunResult:
        """:meth:`Sandbox.run` in this session (``stateful`` defaults to the
        session's)."""
        if stateful is None:
            stateful = self.stateful
        self.sandbox._require(
            "close_session", "its sandbox keeps no sessions: named sessions need a session tier such as docker"
        )
        try:
            res = self.sandbox.run(
                code,
                args,
                allow=allow,
                timeout=timeout,
                on_stdout=on_stdout,
                on_stderr=on_stderr,
                stateful=stateful,
                session=self.name,
                dependencies=dependencies,
                check=check,
            )
        except SandboxError as e:
            if e.result is not None:
                self.artifacts.extend(e.result.artifacts)
            raise
        self.artifacts.extend(res.artifacts)
        return res

    def close(self) -> None:
        """Ends the session on the server (files and state gone). A session
        that was never opened, or is already closed, is no error."""
        try:
            self.sandbox.close_session(self.name)
        except (SandboxError,) as e:
            if "not_found" in e.classes or "session_not_found" in e.classes or "not open" in e.message:
                return
            raise

    def __repr__(self) -> str:
        return "Session(%r, stateful=%r)" % (self.name, self.stateful)

