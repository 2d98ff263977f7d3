"""Starts a real ``orqest-sandbox mcp serve --http`` for the tests."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
IMAGE = os.environ.get("ORQEST_DOCKER_IMAGE", "orqest/agent-runtime:0.1.0")


def cli_binary() -> str:
    """The CLI under test: $ORQEST_SANDBOX_BIN, else the repository's bin/.
    Missing, the tests fail (not skip): they mean nothing without it."""
    path = os.environ.get("ORQEST_SANDBOX_BIN") or os.path.join(REPO, "bin", "orqest-sandbox")
    if not os.access(path, os.X_OK):
        raise AssertionError("no %s: run `make build` first (or set $ORQEST_SANDBOX_BIN)" % path)
    return path


class Server:
    """``orqest-sandbox mcp serve --http 127.0.0.1:0`` with a token file of
    the given clients (name -> token), a policy file, and optional TLS."""

    def __init__(self, config: str, clients: Dict[str, str], extra: Optional[List[str]] = None, bin_path: str = "") -> None:
        self.dir = tempfile.mkdtemp(prefix="orqest-py-")
        self.config = os.path.join(self.dir, "config.hcl")
        with open(self.config, "w") as f:
            f.write(config)
        self.tokens = os.path.join(self.dir, "tokens")
        with open(self.tokens, "w") as f:
            for name, tok in clients.items():
                f.write("%s %s\n" % (name, tok))
        os.chmod(self.tokens, 0o600)
        cmd = [bin_path or cli_binary(), "mcp", "serve", "--http", "127.0.0.1:0", "--config", self.config, "--token-file", self.tokens]
        cmd += extra or []
        self.log: List[str] = []
        self.proc = subprocess.Popen(cmd, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.url = self._wait_url()

    def _wait_url(self, timeout: float = 120.0) -> str:
        found: List[str] = []
        ready = threading.Event()

        def pump() -> None:
            assert self.proc.stderr is not None
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace")
                self.log.append(line)
                m = re.search(r"on (https?://\S+)/mcp", line)
                if m and not found:
                    found.append(m.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        ready.wait(timeout)
        if not found:
            self.stop()
            raise AssertionError("the server did not start:\n" + "".join(self.log))
        return found[0]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: the server closes its sessions
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def new_token() -> str:
    return secrets.token_hex(16)


def docker_available() -> Optional[str]:
    """None when docker and the tier-2 image are there, else why not."""
    if shutil.which("docker") is None:
        return "no docker on PATH"
    try:
        r = subprocess.run(["docker", "image", "inspect", IMAGE], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "docker image inspect %s: %s" % (IMAGE, e)
    if r.returncode != 0:
        return "docker image inspect %s: %s (run `make image`)" % (IMAGE, r.stderr.decode().strip())
    return None


def need_docker(case: unittest.TestCase) -> None:
    """Fails with ORQEST_REQUIRE_DOCKER=1, else skips loudly, without docker
    and the runtime image."""
    why = docker_available()
    if why is None:
        return
    if os.environ.get("ORQEST_REQUIRE_DOCKER") == "1":
        raise AssertionError("ORQEST_REQUIRE_DOCKER=1 but the docker tier cannot run: " + why)
    msg = "SKIPPING the tier-2 (docker) Python client tests: %s (ORQEST_REQUIRE_DOCKER=1 makes this a failure)" % why
    sys.stderr.write("\n" + "!" * 72 + "\n" + msg + "\n" + "!" * 72 + "\n")
    raise unittest.SkipTest(msg)


def remove_docker_user(user: str) -> None:
    subprocess.run(["docker", "volume", "rm", "-f", "orqest-user-" + user], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait(pred, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()
