"""The client against a real ``mcp serve --http`` on tier 2 (the docker
plugin, a container per session): a stateful session keeps its names,
files round-trip, artifacts come back, output streams, sessions close.

Without docker and the runtime image these tests skip, loudly; with
ORQEST_REQUIRE_DOCKER=1 (as `make test` sets where docker is expected) they
fail instead."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import orqest_sandbox as osb  # noqa: E402
from _server import IMAGE, REPO, Server, need_docker, new_token, remove_docker_user  # noqa: E402

TIER2 = """
plugin_dir = "%s"
default_sandbox = "docker"
policy "default" {
  allowed_imports = ["time", "json", "math"]
  timeout         = "30s"
  memory_mb       = 256
}
sandbox "docker" {
  plugin = "docker"
  policy = "default"
  config { image = "%s" }
}
""" % (os.path.join(REPO, "bin"), IMAGE)


class Tier2Docker(unittest.TestCase):
    server: Server
    user: str
    token: str

    @classmethod
    def setUpClass(cls) -> None:
        need_docker(cls)  # type: ignore[arg-type]
        cls.user = "orqtest-py-" + secrets.token_hex(4)
        cls.token = new_token()
        cls.server = Server(TIER2, {cls.user: cls.token})

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()
        out = subprocess.run(
            ["docker", "ps", "-aq", "--filter", "label=org.orqest.sandbox.user=" + cls.user],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        ).stdout.strip()
        remove_docker_user(cls.user)
        if out:
            raise AssertionError("containers of %s left after the server stopped: %r" % (cls.user, out))

    def setUp(self) -> None:
        self.sb = osb.Sandbox(self.server.url, self.token, timeout=180)
        self.addCleanup(self.sb.close)

    def test_stateful_session_keeps_a_name(self) -> None:
        with self.sb.session(stateful=True) as s:
            self.assertTrue(s.run("x = 41\nreturn x").success)
            self.assertEqual(s.run("return x + 1").output, 42)
            # stateful=False for one run: a fresh process, no x.
            with self.assertRaises(osb.ExecutionError) as cm:
                s.run("return x", stateful=False)
            self.assertIn("NameError", cm.exception.result.error)
            self.assertIn(s.name, [i.name for i in self.sb.sessions()])
        # Closed with the block: the name is gone from the server.
        self.assertNotIn(s.name, [i.name for i in self.sb.sessions()])

    def test_files_round_trip_and_artifacts(self) -> None:
        blob = bytes(range(256)) * 4
        with self.sb.session() as s:
            info = s.files.write("data.csv", "a,b\n1,2\n3,4\n")
            self.assertEqual((info.name, info.size), ("data.csv", 12))
            s.files.write("bin/blob.dat", blob)
            self.assertEqual(s.files.read_text("data.csv"), "a,b\n1,2\n3,4\n")
            self.assertEqual(s.files.read("bin/blob.dat"), blob)
            r = s.run(
                "rows = workspace.read_text('data.csv').splitlines()[1:]\n"
                "workspace.write_text('sum.txt', str(sum(int(l.split(',')[0]) for l in rows)))\n"
                "return len(rows)"
            )
            self.assertEqual(r.output, 2)
            arts = {a.name: a for a in r.artifacts}
            self.assertIn("sum.txt", arts, r.artifacts)
            self.assertEqual(arts["sum.txt"].data, b"4")
            self.assertEqual([a.name for a in s.artifacts], [a.name for a in r.artifacts])
            self.assertEqual(s.files.read_text("sum.txt"), "4")
            names = sorted(f.name for f in s.files.list())
            for want in ("data.csv", "sum.txt"):
                self.assertIn(want, names)
            with self.assertRaises(osb.SandboxError) as cm:
                s.files.read("../../etc/passwd")
            self.assertIsInstance(cm.exception, (osb.InvalidArgumentError, osb.NotFoundError))
            with self.assertRaises(osb.NotFoundError):
                s.files.read("nothere.txt")
            name = s.name
        # The session's files went with it.
        with self.assertRaises(osb.NotFoundError):
            self.sb.session(name, close=False).files.list()

    def test_default_session_files(self) -> None:
        self.sb.files.write("d.txt", "default")
        self.assertEqual(self.sb.run("return workspace.read_text('d.txt')").output, "default")
        self.assertIn("d.txt", [f.name for f in self.sb.files.list()])
        self.assertEqual(self.sb.files.read_text("d.txt"), "default")

    def test_streaming_in_a_session(self) -> None:
        got = []
        t0 = time.monotonic()
        with self.sb.session() as s:
            r = s.run(
                "import time\nprint('start', flush=True)\ntime.sleep(1.5)\nprint('end', flush=True)\nreturn 1",
                allow=["time"],
                on_stdout=lambda c: got.append((time.monotonic(), c)),
            )
            end = time.monotonic()
        self.assertEqual(r.output, 1)
        self.assertEqual("".join(c for _, c in got), "start\nend\n")
        self.assertLess(got[0][0], end - 1.0, "first chunk at %.2fs, result at %.2fs" % (got[0][0] - t0, end - t0))

    def test_validation_error_in_a_session(self) -> None:
        with self.sb.session() as s:
            with self.assertRaises(osb.ValidationError) as cm:
                s.run("import subprocess\nreturn 1")
            self.assertEqual((cm.exception.stage, cm.exception.kind), ("validation", "validation"))
            self.assertEqual(cm.exception.findings[0].rule, "import-not-allowed")

    def test_bad_token_is_refused(self) -> None:
        with self.assertRaises(osb.AuthenticationError):
            osb.Sandbox(self.server.url, "x" * 32).session().files.list()


if __name__ == "__main__":
    unittest.main()
