"""Unit tests of the client's pieces that need no server: SSE parsing,
addresses, tokens, the error classes, result decoding, tool definitions."""

from __future__ import annotations

import io
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import orqest_sandbox as osb  # noqa: E402
from orqest_sandbox import _mcp  # noqa: E402
from orqest_sandbox.errors import _classify  # noqa: E402


class SSE(unittest.TestCase):
    def events(self, text: str):
        return list(_mcp.iter_sse(iter(io.BytesIO(text.encode()).readline, b"")))

    def test_events(self) -> None:
        got = self.events(
            ": a comment\r\nevent: message\r\nid: 1\r\ndata: {\"a\":\r\ndata:1}\r\n\r\n"
            "data: two\n\n\ndata:three"
        )
        self.assertEqual(got, [("message", '{"a":\n1}'), ("message", "two"), ("message", "three")])

    def test_no_data_no_event(self) -> None:
        self.assertEqual(self.events("event: x\n\n: ping\n\n"), [])


class Addresses(unittest.TestCase):
    def test_endpoint(self) -> None:
        self.assertEqual(_mcp.endpoint_of("http://127.0.0.1:8765"), "http://127.0.0.1:8765/mcp")
        self.assertEqual(_mcp.endpoint_of("https://h/"), "https://h/mcp")
        self.assertEqual(_mcp.endpoint_of("https://h/x/mcp"), "https://h/x/mcp")
        for bad in ("127.0.0.1:8765", "ftp://h", "http://"):
            with self.assertRaises(ValueError):
                _mcp.endpoint_of(bad)

    def test_tokens(self) -> None:
        with self.assertRaisesRegex(ValueError, "no token"):
            osb.Sandbox("http://h", token="  ")
        with self.assertRaisesRegex(ValueError, "one bare token"):
            osb.Sandbox("http://h", token="alice abc")
        old = os.environ.pop("ORQEST_ADDR", None)
        try:
            with self.assertRaisesRegex(ValueError, "no server"):
                osb.Sandbox(token="t")
        finally:
            if old is not None:
                os.environ["ORQEST_ADDR"] = old


class Errors(unittest.TestCase):
    def test_classes(self) -> None:
        self.assertIsInstance(_classify("x", classes=["session_not_found", "not_found"]), osb.NotFoundError)
        self.assertIsInstance(_classify("x", field="path"), osb.InvalidArgumentError)
        self.assertIsInstance(_classify("plugin died", classes=["unavailable"], structured={"stage": "infrastructure"}), osb.InfrastructureError)
        # The stage decides, not the text.
        self.assertIsInstance(_classify("sandbox failure: x", classes=["unavailable"], structured={"stage": "policy"}), osb.InvalidArgumentError)
        e = _classify("x", classes=["invalid_argument"], field="timeout_s", structured={"stage": "validation"})
        self.assertEqual((type(e), e.stage), (osb.InvalidArgumentError, "validation"))
        self.assertIsInstance(_classify("x", classes=["permission_denied"]), osb.PermissionDeniedError)
        self.assertIsInstance(_classify("x", classes=["not_supported"]), osb.NotSupportedError)
        e = _classify("x", classes=["invalid_argument"], field="session", tool="put_file")
        self.assertEqual((e.stage, e.field, e.tool, e.classes), ("policy", "session", "put_file", ["invalid_argument"]))
        self.assertIn("field='session'", repr(e))
        for cls in (osb.ValidationError, osb.SandboxTimeoutError, osb.AuthenticationError, osb.ProtocolError):
            self.assertTrue(issubclass(cls, osb.SandboxError))
        self.assertTrue(issubclass(osb.SandboxTimeoutError, osb.ExecutionError))


class Results(unittest.TestCase):
    def test_from_structured(self) -> None:
        r = osb.RunResult.from_structured({
            "success": True, "output": {"a": 1}, "stdout": "hi\n", "stderr": "", "duration_ms": 3.5,
            "limits": {"timeout_ms": 5000}, "state_lost": True,
            "artifacts": [{"name": "c.png", "mime_type": "image/png", "size": 3, "data": "AAEC"},
                          {"name": "big.bin", "size": 9, "omitted": True}],
        })
        self.assertEqual((r.output, r.stdout, r.duration_ms, r.state_lost), ({"a": 1}, "hi\n", 3.5, True))
        self.assertEqual(r.artifacts[0].data, b"\x00\x01\x02")
        self.assertTrue(r.artifacts[1].omitted)
        self.assertIsNone(r.artifacts[1].data)
        self.assertEqual(r.text, '{"a": 1}')


class ToolDefinitions(unittest.TestCase):
    def test_formats(self) -> None:
        sb = osb.Sandbox("http://127.0.0.1:1", token="t")
        tool = osb.PythonTool(sb, allow=[])
        self.assertIn("no modules", tool.description)
        self.assertEqual(tool.openai_responses()["name"], "run_python")
        self.assertEqual(tool.definition("mcp")["inputSchema"]["properties"]["code"]["type"], "string")
        self.assertEqual(tool.definition("anthropic")["name"], "run_python")
        with self.assertRaises(ValueError):
            tool.definition("nope")
        self.assertTrue(tool({"args": {}}).startswith("error:"))
        self.assertEqual(sb.as_tool(name="py").name, "py")

    def test_session_names(self) -> None:
        sb = osb.Sandbox("http://127.0.0.1:1", token="t")
        for bad in ("../s1", "-x", "a" * 65, "é"):
            with self.assertRaises(osb.InvalidArgumentError):
                sb.session(bad)
        self.assertEqual(sb.session("s_1-a").name, "s_1-a")


if __name__ == "__main__":
    unittest.main()
