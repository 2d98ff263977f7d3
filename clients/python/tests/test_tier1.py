"""The client against a real ``mcp serve --http`` on tier 1 (subprocess
plugin): runs, streaming, the typed errors, the token, TLS, spawned tools,
the LLM tool helper."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import orqest_sandbox as osb  # noqa: E402
from _server import REPO, Server, new_token  # noqa: E402

TIER1 = """
plugin_dir = "%s"
default_sandbox = "tier1"
plugin "subprocess" {}
policy "default" {
  allowed_imports = ["time", "math", "json"]
  timeout         = "10s"
  memory_mb       = 128
}
sandbox "tier1" {
  plugin = "subprocess"
  policy = "default"
  config { python = "/usr/bin/python3" }
}
""" % os.path.join(REPO, "bin")


class Tier1(unittest.TestCase):
    server: Server
    token: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.token = new_token()
        cls.server = Server(TIER1, {"pyalice": cls.token})

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()

    def setUp(self) -> None:
        self.sb = osb.Sandbox(self.server.url, self.token)
        self.addCleanup(self.sb.close)

    def test_run_returns_result(self) -> None:
        r = self.sb.run("print('hello')\nreturn args['x'] * 2", {"x": 21})
        self.assertTrue(r.success)
        self.assertEqual(r.output, 42)
        self.assertEqual(r.stdout, "hello\n")
        self.assertGreater(r.duration_ms, 0)
        self.assertEqual(r.limits.get("timeout_ms"), 10000)
        self.assertEqual(self.sb.protocol_version, "2025-06-18")

    def test_structured_output(self) -> None:
        r = self.sb.run("import math\nreturn {'pi': round(math.pi, 2), 'xs': [1, None, 'a']}", allow=["math"])
        self.assertEqual(r.output, {"pi": 3.14, "xs": [1, None, "a"]})

    def test_streaming_callbacks_arrive_while_running(self) -> None:
        got = []  # (time, stream, text)
        t0 = time.monotonic()
        r = self.sb.run(
            "import time\nprint('one', flush=True)\ntime.sleep(1.0)\nprint('two', flush=True)\nreturn 7",
            allow=["time"],
            on_stdout=lambda s: got.append((time.monotonic(), "stdout", s)),
            on_stderr=lambda s: got.append((time.monotonic(), "stderr", s)),
        )
        end = time.monotonic()
        self.assertEqual(r.output, 7)
        self.assertEqual("".join(s for _, k, s in got if k == "stdout"), "one\ntwo\n")
        self.assertEqual([s for _, k, s in got if k == "stderr"], [])
        self.assertEqual(r.stdout, "one\ntwo\n")  # the result still holds it all
        # 'one' came before the sleep ended, not with the result.
        self.assertLess(got[0][0], end - 0.5, "the first chunk arrived %.2fs after the start, the result %.2fs" % (got[0][0] - t0, end - t0))

    def test_callback_exception_cancels_the_run(self) -> None:
        class Stop(Exception):
            pass

        def cb(_: str) -> None:
            raise Stop()

        t0 = time.monotonic()
        with self.assertRaises(Stop):
            self.sb.run("import time\nprint('go', flush=True)\ntime.sleep(8)\nreturn 1", allow=["time"], on_stdout=cb)
        self.assertLess(time.monotonic() - t0, 6, "the exception waited for the run to end")
        self.assertEqual(self.sb.run("return 5").output, 5)  # the client goes on

    def test_validation_error_is_typed(self) -> None:
        with self.assertRaises(osb.ValidationError) as cm:
            self.sb.run("import os\nreturn os.getcwd()")
        e = cm.exception
        self.assertEqual(e.stage, "validation")
        self.assertEqual(e.kind, "validation")
        self.assertIsInstance(e, osb.SandboxError)
        self.assertEqual([f.rule for f in e.findings], ["import-not-allowed"])
        self.assertEqual((e.findings[0].line, e.findings[0].column), (1, 8))
        self.assertIn("os", str(e))
        self.assertFalse(e.result.success)

    def test_execution_errors(self) -> None:
        with self.assertRaises(osb.ExecutionError) as cm:
            self.sb.run("print('before')\nreturn 1 / 0")
        e = cm.exception
        self.assertEqual((e.stage, e.kind), ("execution", "runtime"))
        self.assertIn("ZeroDivisionError", e.result.error)
        self.assertEqual(e.result.stdout, "before\n")
        with self.assertRaises(osb.SandboxTimeoutError) as cm2:
            self.sb.run("while True:\n    pass", timeout=0.5)
        self.assertEqual((cm2.exception.stage, cm2.exception.kind), ("execution", "timeout"))
        # check=False: the failed run's result, no exception.
        r = self.sb.run("return 1 / 0", check=False)
        self.assertFalse(r.success)
        self.assertEqual(r.error_kind, "runtime")

    def test_refused_request_names_the_field(self) -> None:
        with self.assertRaises(osb.InvalidArgumentError) as cm:
            self.sb.run("return 1", allow=["socket"])
        self.assertEqual((cm.exception.stage, cm.exception.field), ("policy", "allowed_imports"))
        with self.assertRaises(osb.InvalidArgumentError) as cm:
            self.sb.run("return 1", timeout=-1)
        self.assertEqual(cm.exception.field, "timeout_s")
        # Above the policy's ceiling (its 10 s timeout): refused at the
        # policy stage, not cut to fit.
        with self.assertRaises(osb.InvalidArgumentError) as cm:
            self.sb.run("return 1", timeout=100)
        self.assertEqual((cm.exception.stage, cm.exception.field), ("policy", "timeout"))
        self.assertIn("ceiling", str(cm.exception))
        # A package outside allowed_packages: the policy refuses it.
        with self.assertRaises(osb.PermissionDeniedError) as cm2:
            self.sb.run("return 1", dependencies=["requests"])
        self.assertIn("allowed_packages", str(cm2.exception))

    def test_policy_imports_need_no_allow(self) -> None:
        self.assertEqual(self.sb.run("import math\nreturn math.floor(2.5)").output, 2)

    def test_bad_token_is_refused(self) -> None:
        bad = osb.Sandbox(self.server.url, "not-the-token-not-the-token-0000")
        with self.assertRaises(osb.AuthenticationError) as cm:
            bad.run("return 1")
        self.assertEqual((cm.exception.status, cm.exception.stage), (401, "auth"))
        self.assertIn("refused the token", str(cm.exception))
        with self.assertRaises(osb.AuthenticationError):
            bad.connect()

    def test_token_file_and_environment(self) -> None:
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        tf = os.path.join(d, "token")
        with open(tf, "w") as f:
            f.write(self.token + "\n")
        self.assertEqual(osb.Sandbox(self.server.url, token_file=tf).run("return 1").output, 1)
        old = dict(os.environ)
        self.addCleanup(lambda: (os.environ.clear(), os.environ.update(old)))
        os.environ["ORQEST_ADDR"], os.environ["ORQEST_TOKEN"] = self.server.url, self.token
        self.assertEqual(osb.Sandbox().run("return 2").output, 2)
        with open(tf, "w") as f:
            f.write("pyalice " + self.token + "\n")  # the server's file, not a client's
        with self.assertRaisesRegex(ValueError, "one bare token"):
            osb.Sandbox(self.server.url, token_file=tf)

    def test_no_server(self) -> None:
        with self.assertRaises(osb.SandboxConnectionError) as cm:
            osb.Sandbox("http://127.0.0.1:1", self.token).run("return 1")
        self.assertEqual(cm.exception.stage, "transport")
        with self.assertRaises(ValueError):
            osb.Sandbox("127.0.0.1:8765", self.token)

    def test_sessions_need_a_session_tier(self) -> None:
        with self.assertRaises(osb.NotSupportedError):
            with self.sb.session("s1") as s:
                s.run("return 1")
        with self.assertRaises(osb.NotSupportedError):
            self.sb.session("s1", close=False).files.list()

    def test_spawned_tool(self) -> None:
        info = self.sb.spawn_tool(
            "py_add", "return args['a'] + args['b']", description="adds", parameters={"a": {"type": "integer"}, "b": {"type": "integer"}}
        )
        self.assertEqual(info["tool"], "py_add")
        self.assertIn("py_add", self.sb.tools())
        self.assertEqual(self.sb.call("py_add", {"a": 2, "b": 3}).output, 5)
        with self.assertRaises(osb.ValidationError) as cm:
            self.sb.spawn_tool("py_bad", "import os\nreturn 1")
        self.assertEqual(cm.exception.findings[0].rule, "import-not-allowed")

    def test_unknown_tool_is_a_protocol_error(self) -> None:
        with self.assertRaises(osb.ProtocolError) as cm:
            self.sb.call("no_such_tool", {})
        self.assertEqual(cm.exception.stage, "protocol")
        self.assertNotEqual(cm.exception.code, 0)

    def test_concurrent_runs_share_a_client(self) -> None:
        out = {}

        def one(i: int) -> None:
            out[i] = self.sb.run("return args['i'] * 10", {"i": i}).output

        ts = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(out, {i: i * 10 for i in range(4)})

    def test_llm_tool_helper(self) -> None:
        tool = osb.PythonTool(self.sb, allow=["math"])
        oa, an = tool.openai(), tool.anthropic()
        self.assertEqual(oa["type"], "function")
        self.assertEqual(oa["function"]["name"], "run_python")
        self.assertEqual(oa["function"]["parameters"]["required"], ["code"])
        self.assertEqual(an["input_schema"], oa["function"]["parameters"])
        self.assertIn("math", an["description"])
        # A call as the model sends it (JSON text), and the text it gets back.
        reply = json.loads(tool(json.dumps({"code": "import math\nprint('hi')\nreturn math.floor(args['x'])", "args": {"x": 2.7}})))
        self.assertEqual(reply, {"result": 2, "stdout": "hi\n"})
        text = tool({"code": "import os\nreturn 1"})
        self.assertTrue(text.startswith("error (validation)"), text)
        self.assertIn("1:8: import-not-allowed", text)
        self.assertIn("ZeroDivisionError", tool({"code": "return 1/0"}))
        self.assertTrue(tool("{not json").startswith("error:"))
        bad = osb.PythonTool(osb.Sandbox(self.server.url, "not-the-token-not-the-token-0000"))
        with self.assertRaises(osb.AuthenticationError):
            bad({"code": "return 1"})


@unittest.skipUnless(shutil.which("openssl"), "no openssl to make a test certificate")
class Tier1TLS(unittest.TestCase):
    """https with a private CA, as the CLI's --ca-cert."""

    def test_https_with_ca_cert(self) -> None:
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        tok = new_token()
        srv = Server(TIER1, {"pytls": tok}, extra=["--tls-cert", cert, "--tls-key", key])
        self.addCleanup(srv.stop)
        self.assertTrue(srv.url.startswith("https://"), srv.url)
        self.assertEqual(osb.Sandbox(srv.url, tok, ca_cert=cert).run("return 3").output, 3)
        with self.assertRaises(osb.SandboxConnectionError) as cm:  # not trusted without the CA
            osb.Sandbox(srv.url, tok).run("return 3")
        self.assertIn("CERTIFICATE", str(cm.exception).upper())


if __name__ == "__main__":
    unittest.main()
