"""pause_session and resume_session through a real ``mcp serve --http``
with the repository's in-memory session test plugin (host/testdata/
sessionplugin, built here with ``go build``), which saves a paused session
to a file in its ``pause_dir``: the client pauses, sees the session listed
as paused, resumes it with its counter, and a sandbox that cannot pause
raises NotSupportedError. The real checkpoint of tier 3 is tested in Go
(plugins/gvisor, host)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import orqest_sandbox as osb  # noqa: E402
from _server import REPO, Server, new_token  # noqa: E402

CONFIG = """
plugin_dir = "%s"
default_sandbox = "s"
sandbox "s" {
  plugin = "sessions"
  %s
}
"""


class Pause(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.dir = tempfile.mkdtemp(prefix="orqest-py-pause-")
        go = shutil.which("go") or "/usr/local/go/bin/go"
        subprocess.run([go, "build", "-o", os.path.join(cls.dir, "orqest-sandbox-plugin-sessions"), "./host/testdata/sessionplugin"],
                       cwd=REPO, check=True)
        cls.paused = os.path.join(cls.dir, "paused")
        os.mkdir(cls.paused, 0o700)

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.dir, ignore_errors=True)

    def serve(self, block: str) -> osb.Sandbox:
        tok = new_token()
        server = Server(CONFIG % (self.dir, block), {"alice": tok})
        self.addCleanup(server.stop)
        sb = osb.Sandbox(server.url, tok, timeout=60)
        self.addCleanup(sb.close)
        return sb

    def test_pause_and_resume(self) -> None:
        sb = self.serve('config { pause_dir = "%s" }' % self.paused)
        self.assertEqual(sb.run("count", session="s1").output, 1)
        saved = sb.pause_session("s1")
        self.assertFalse(saved["memory"])
        self.assertEqual(saved["kept"], ["count"])
        self.assertEqual([s.state for s in sb.sessions() if s.name == "s1"], ["paused"])
        self.assertEqual(len(os.listdir(self.paused)), 1)
        self.assertFalse(sb.resume_session("s1")["state_lost"])
        self.assertEqual(sb.run("count", session="s1").output, 2)
        with self.assertRaises(osb.errors.SandboxError) as cm:
            sb.resume_session("s1")
        self.assertIn("failed_precondition", cm.exception.classes)
        sb.pause_session("s1")
        self.assertEqual(sb.run("count", session="s1").output, 3)  # its next call resumes it

    def test_not_supported(self) -> None:
        sb = self.serve("")
        sb.run("count", session="s1")
        with self.assertRaises(osb.NotSupportedError) as cm:
            sb.pause_session("s1")
        self.assertIn("not_supported", cm.exception.classes)
        self.assertEqual(sb.run("count", session="s1").output, 2)


if __name__ == "__main__":
    unittest.main()
