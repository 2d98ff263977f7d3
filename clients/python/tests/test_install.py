"""The offline install the README describes, followed to the letter on a
copy of this tree: `make python-client` builds the wheel with Debian's
setuptools, a venv gets it with `pip install --no-index`, and the
installed package (not the source tree) talks to a real server: a run on
tier 1, and the README's example on tier 2 (docker)."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _server import REPO, Server, need_docker, new_token, remove_docker_user  # noqa: E402
from test_tier1 import TIER1  # noqa: E402
from test_tier2_docker import TIER2  # noqa: E402

README = os.path.join(REPO, "clients", "python", "README.md")


def readme_example() -> str:
    """The README's first python block."""
    with open(README) as f:
        m = re.search(r"```python\n(.*?)```", f.read(), re.S)
    assert m, "no python example in " + README
    return m.group(1)


class OfflineInstall(unittest.TestCase):
    tmp: str
    venv_python: str
    wheel: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.mkdtemp(prefix="orqest-py-install-")
        env = dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1")
        env.pop("PYTHONPATH", None)
        dist = os.path.join(cls.tmp, "dist")
        cls.run_ok(["make", "--no-print-directory", "-C", REPO, "python-client", "PY_DIST=" + dist], env)
        wheels = [w for w in os.listdir(dist) if w.endswith(".whl")]
        assert len(wheels) == 1, wheels
        cls.wheel = os.path.join(dist, wheels[0])
        venv = os.path.join(cls.tmp, "venv")
        cls.run_ok(["/usr/bin/python3", "-m", "venv", venv], env)
        cls.run_ok([os.path.join(venv, "bin", "pip"), "install", "--no-index", cls.wheel], env)
        cls.venv_python = os.path.join(venv, "bin", "python")
        cls.env = env

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @staticmethod
    def run_ok(cmd, env) -> str:
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
        if r.returncode != 0:
            raise AssertionError("%s: exit %d\n%s" % (" ".join(cmd), r.returncode, r.stdout.decode()))
        return r.stdout.decode()

    def venv_run(self, code: str) -> str:
        """Runs code with the venv's python outside the source tree."""
        r = subprocess.run([self.venv_python, "-c", code], cwd=self.tmp, env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        self.assertEqual(r.returncode, 0, "stdout:\n%s\nstderr:\n%s" % (r.stdout.decode(), r.stderr.decode()))
        return r.stdout.decode()

    def test_wheel_metadata(self) -> None:
        import zipfile

        with zipfile.ZipFile(self.wheel) as z:
            names = z.namelist()
            meta = z.read([n for n in names if n.endswith("METADATA")][0]).decode()
        self.assertIn("orqest_sandbox/py.typed", names)
        self.assertIn("Requires-Python: >=3.9", meta)
        self.assertNotIn("Requires-Dist", meta)  # standard library only
        self.assertFalse([n for n in names if "tests" in n], names)

    def test_installed_package_runs_on_tier1(self) -> None:
        tok = new_token()
        srv = Server(TIER1, {"pyinstall": tok})
        self.addCleanup(srv.stop)
        out = self.venv_run(textwrap.dedent("""
            import orqest_sandbox, sys
            assert "site-packages" in orqest_sandbox.__file__, orqest_sandbox.__file__
            sb = orqest_sandbox.Sandbox(%r, token=%r)
            print(sb.run("return 6 * 7").output)
        """ % (srv.url, tok)))
        self.assertEqual(out.strip(), "42")

    def test_readme_example_on_tier2(self) -> None:
        need_docker(self)
        user = "orqtest-pyreadme-" + secrets.token_hex(4)
        tok = "0123456789abcdef0123456789abcdef"  # the README's
        srv = Server(TIER2, {user: tok})
        self.addCleanup(remove_docker_user, user)
        self.addCleanup(srv.stop)
        code = readme_example().replace("http://127.0.0.1:8765", srv.url)
        out = self.venv_run(code)
        lines = out.splitlines()
        self.assertTrue(lines[0].startswith("1.4142135623730951 "), out)
        self.assertTrue(lines[1].startswith("validation validation 1:8: import-not-allowed"), out)
        self.assertEqual(lines[2], "2 ['n.txt'] 2", out)


if __name__ == "__main__":
    unittest.main()
