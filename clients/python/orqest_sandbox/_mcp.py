"""A minimal MCP client over Streamable HTTP, standard library only.

It speaks what ``orqest-sandbox mcp serve --http`` serves: JSON-RPC 2.0
POSTed to the endpoint, answered with ``application/json`` or with a
``text/event-stream`` (SSE) that carries the call's notifications (the
code's output as progress notifications) before its response.
"""

from __future__ import annotations

import itertools
import json
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from .errors import (
    AuthenticationError,
    NotFoundError,
    PermissionDeniedError,
    ProtocolError,
    SandboxConnectionError,
    SandboxError,
)

#: The protocol revision the client asks for. The server answers with the
#: one it will speak; the client accepts any of SUPPORTED_PROTOCOL_VERSIONS.
PROTOCOL_VERSION = "2025-06-18"
SUPPORTED_PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"

Notification = Dict[str, Any]
NotificationHandler = Callable[[Notification], None]


def endpoint_of(address: str) -> str:
    """The MCP endpoint of a server address: an http or https URL, with
    ``/mcp`` when it names no path (as the CLI's ``--addr``)."""
    u = urllib.parse.urlsplit(address)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise ValueError(
            "address %r: give the server's URL, such as http://127.0.0.1:8765" % (address,)
        )
    path = u.path if u.path not in ("", "/") else "/mcp"
    return urllib.parse.urlunsplit((u.scheme, u.netloc, path, u.query, ""))


def iter_sse(lines: Iterator[bytes]) -> Iterator[Tuple[str, str]]:
    """Yields (event, data) of each event of a text/event-stream, as the
    HTML standard's parsing rules say (comments and ids skipped)."""
    event, data = "", []  # type: Tuple[str, List[str]]
    for raw in lines:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if data:
                yield event or "message", "\n".join(data)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
    if data:
        yield event or "message", "\n".join(data)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuses redirects: the bearer token goes to the address given only."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[override]
        return None


class MCPConnection:
    """One MCP session with the server: initialize on first use, then
    requests and notifications with the session's id. Safe to share
    between threads (each request is its own HTTP exchange)."""

    def __init__(
        self,
        endpoint: str,
        token: str,
        *,
        ssl_context: Optional[ssl.SSLContext] = None,
        timeout: float = 60.0,
        client_name: str = "orqest-sandbox-python",
        client_version: str = "0",
    ) -> None:
        self.endpoint = endpoint
        self._token = token
        self.timeout = timeout
        self._client_info = {"name": client_name, "version": client_version}
        handlers: List[Any] = [_NoRedirect(), urllib.request.ProxyHandler()]
        if ssl_context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=ssl_context))
        self._opener = urllib.request.build_opener(*handlers)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.session_id: Optional[str] = None
        self.protocol_version: Optional[str] = None
        self.server_info: Dict[str, Any] = {}
        self.capabilities: Dict[str, Any] = {}

    # -- session -------------------------------------------------------

    def connect(self) -> None:
        """Initializes the MCP session unless it is open."""
        with self._lock:
            if self.session_id is not None:
                return
            self._initialize()

    def _initialize(self) -> None:
        self.session_id, self.protocol_version = None, None
        res = self._request_once(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": self._client_info,
            },
            None,
            self.timeout,
        )
        version = res.get("protocolVersion")
        if version not in SUPPORTED_PROTOCOL_VERSIONS:
            raise ProtocolError(
                "the server at %s speaks MCP %r; this client speaks %s"
                % (self.endpoint, version, ", ".join(SUPPORTED_PROTOCOL_VERSIONS))
            )
        self.protocol_version = version
        self.server_info = res.get("serverInfo") or {}
        self.capabilities = res.get("capabilities") or {}
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"}, None, self.timeout)

    def close(self) -> None:
        """Ends the MCP session (DELETE); the server's sandbox sessions stay."""
        with self._lock:
            sid, self.session_id = self.session_id, None
        if sid is None:
            return
        req = urllib.request.Request(self.endpoint, method="DELETE", headers=self._headers(sid))
        try:
            with self._opener.open(req, timeout=5):
                pass
        except (urllib.error.URLError, OSError):
            pass

    # -- requests ------------------------------------------------------

    def request(
        self,
        method: str,
        params: Optional[Dict[str, Any]] = None,
        *,
        on_notification: Optional[NotificationHandler] = None,
        timeout: Optional[float] = None,
    ) -> Dict[str, Any]:
        """Sends a request and returns its result; notifications that come
        on its stream go to on_notification. A session the server no longer
        knows (HTTP 404) is opened again once and the request resent."""
        self.connect()
        try:
            return self._request_once(method, params, on_notification, timeout or self.timeout)
        except _SessionGone:
            with self._lock:
                self._initialize()
            return self._request_once(method, params, on_notification, timeout or self.timeout)

    def _request_once(
        self,
        method: str,
        params: Optional[Dict[str, Any]],
        on_notification: Optional[NotificationHandler],
        timeout: float,
    ) -> Dict[str, Any]:
        rid = next(self._ids)
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        try:
            resp = self._post(msg, on_notification, timeout)
        except (SandboxError, _SessionGone):
            raise
        except BaseException:
            # Ctrl-C, or an exception of a notification callback: tell the
            # server to stop the request (it cancels the execution).
            if method != "initialize":
                self.cancel(rid, "the client gave up on the request")
            raise
        if resp is None:
            raise SandboxConnectionError(
                "the server at %s sent no response to %s" % (self.endpoint, method), stage="transport"
            )
        if "error" in resp:
            err = resp["error"] or {}
            raise ProtocolError(
                "%s: %s (JSON-RPC error %s)" % (method, err.get("message", ""), err.get("code")),
                code=int(err.get("code") or 0),
                data=err.get("data"),
            )
        return resp.get("result") or {}

    def cancel(self, rid: int, reason: str) -> None:
        """Sends notifications/cancelled for request rid (best effort)."""
        try:
            self._post(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": reason}},
                None,
                5.0,
            )
        except Exception:  # noqa: BLE001 - the request is being abandoned anyway
            pass

    def _headers(self, sid: Optional[str]) -> Dict[str, str]:
        h = {
            "Authorization": "Bearer " + self._token,
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "User-Agent": "%s/%s" % (self._client_info["name"], self._client_info["version"]),
        }
        if sid:
            h[SESSION_HEADER] = sid
        if self.protocol_version:
            h[VERSION_HEADER] = self.protocol_version
        return h

    def _post(
        self,
        msg: Dict[str, Any],
        on_notification: Optional[NotificationHandler],
        timeout: float,
    ) -> Optional[Dict[str, Any]]:
        """POSTs one message; returns the response with msg's id (None for
        a notification)."""
        body = json.dumps(msg).encode("utf-8")
        sid = self.session_id
        req = urllib.request.Request(self.endpoint, data=body, method="POST", headers=self._headers(sid))
        try:
            resp = self._opener.open(req, timeout=timeout)
        except urllib.error.HTTPError as e:
            raise self._http_error(e, sid) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise SandboxConnectionError(
                "cannot reach the server at %s (is `orqest-sandbox mcp serve --http` running there?): %s"
                % (self.endpoint, reason),
                stage="transport",
            ) from None
        with resp:
            if msg.get("method") == "initialize":
                self.session_id = resp.headers.get(SESSION_HEADER)
            if "id" not in msg:
                return None
            ctype = (resp.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            try:
                if ctype == "text/event-stream":
                    return self._read_stream(resp, msg["id"], on_notification)
                if ctype == "application/json":
                    return self._match(json.loads(resp.read().decode("utf-8")), msg["id"], on_notification)
            except (socket.timeout, OSError) as e:
                raise SandboxConnectionError(
                    "the server at %s stopped answering %s: %s" % (self.endpoint, msg.get("method"), e),
                    stage="transport",
                ) from None
            except ValueError as e:
                raise SandboxConnectionError(
                    "the server at %s answered %s with invalid JSON: %s" % (self.endpoint, msg.get("method"), e),
                    stage="transport",
                ) from None
            raise SandboxConnectionError(
                "the server at %s answered with Content-Type %r, not MCP" % (self.endpoint, ctype),
                stage="transport",
            )

    def _read_stream(
        self, resp: Any, rid: int, on_notification: Optional[NotificationHandler]
    ) -> Optional[Dict[str, Any]]:
        for _event, data in iter_sse(iter(resp.readline, b"")):
            if not data.strip():
                continue
            found = self._match(json.loads(data), rid, on_notification)
            if found is not None:
                return found
        return None

    def _match(
        self, payload: Any, rid: int, on_notification: Optional[NotificationHandler]
    ) -> Optional[Dict[str, Any]]:
        """Dispatches a JSON-RPC message or batch; returns rid's response."""
        found = None
        for m in payload if isinstance(payload, list) else [payload]:
            if not isinstance(m, dict):
                continue
            if "method" in m and "id" not in m:
                if on_notification is not None:
                    on_notification(m)
            elif "method" in m:
                # A request from the server (e.g. ping): answer it.
                self._answer(m)
            elif m.get("id") == rid:
                found = m
        return found

    def _answer(self, m: Dict[str, Any]) -> None:
        reply: Dict[str, Any] = {"jsonrpc": "2.0", "id": m["id"]}
        if m.get("method") == "ping":
            reply["result"] = {}
        else:
            reply["error"] = {"code": -32601, "message": "method not supported by this client"}
        try:
            self._post(reply, None, self.timeout)
        except Exception:  # noqa: BLE001 - best effort
            pass

    def _http_error(self, e: urllib.error.HTTPError, sid: Optional[str]) -> Exception:
        try:
            text = e.read().decode("utf-8", "replace").strip()
        except Exception:  # noqa: BLE001
            text = ""
        detail = text
        try:
            detail = json.loads(text)["error"]["message"]
        except Exception:  # noqa: BLE001
            pass
        if e.code == 401:
            return AuthenticationError(
                "the server at %s refused the token (401): check the token (token=, token_file= or $ORQEST_TOKEN)"
                % (self.endpoint,),
                status=401,
            )
        if e.code == 403:
            return PermissionDeniedError(
                "the server at %s refused the request (403): %s" % (self.endpoint, detail), status=403
            )
        if e.code == 404 and sid:
            return _SessionGone()
        if e.code == 404:
            return NotFoundError(
                "no MCP endpoint at %s (404): give the address of `orqest-sandbox mcp serve --http`"
                % (self.endpoint,),
                stage="transport",
            )
        return SandboxConnectionError(
            "the server at %s answered HTTP %d: %s" % (self.endpoint, e.code, detail), stage="transport"
        )


class _SessionGone(Exception):
    """The server answered 404 to a request of our MCP session."""
