"""Real custody servers for the tests: ``custody init`` in a temporary folder,
then ``custody serve`` on a free loopback port. The binary is $CUSTODY_BIN,
or built with ``go build`` into the repository's .cache/python (scripts/python.sh
builds it first). Without Go the tests skip, unless CI is set: then they fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

import pytest

import custody

REPO = Path(__file__).resolve().parents[3]
_built: Optional[str] = None


def custody_bin() -> str:
    global _built
    if os.environ.get("CUSTODY_BIN"):
        return os.environ["CUSTODY_BIN"]
    if _built:
        return _built
    if shutil.which("go") is None:
        if os.environ.get("CI"):
            raise RuntimeError("CI is set and there is no Go toolchain to build custody")
        pytest.skip("no Go toolchain to build custody")
    out = REPO / ".cache/python/custody"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["go", "build", "-o", str(out), "./cmd/custody"], cwd=REPO, check=True)
    _built = str(out)
    return _built


def run(*args: str, env: Optional[dict] = None) -> str:
    r = subprocess.run([custody_bin(), *args], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"custody {' '.join(args)}: exit {r.returncode}: {r.stderr}")
    return r.stdout


class Server:
    """One ``custody serve`` process."""

    def __init__(self, args: list[str], env: Optional[dict] = None) -> None:
        self.args = args
        self.env = env
        self.proc: Optional[subprocess.Popen] = None
        self.port = 0
        self.log: list[str] = []

    def start(self) -> "Server":
        addr = f"127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([custody_bin(), "serve", "--addr", addr, *self.args], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=self.env)
        got = threading.Event()
        proc = self.proc

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                self.log.append(line)
                m = re.search(r"msg=serving (?:log=\S+ )?addr=127\.0\.0\.1:(\d+)", line)
                if m and not got.is_set():
                    self.port = int(m.group(1))
                    got.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 30
        while not got.wait(0.05):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"custody serve did not start: {''.join(self.log)}")
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, sig: int = signal.SIGTERM) -> None:
        p, self.proc = self.proc, None
        if p is None:
            return
        p.send_signal(sig)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Ledger:
    """A log in a temporary folder, served on loopback."""

    def __init__(self, origin: str = "example.com/py-sdk", serve: bool = True, extra: Optional[list[str]] = None) -> None:
        self.dir = tempfile.mkdtemp(prefix="custody-py-")
        self.info = json.loads(run("init", "--dir", os.path.join(self.dir, "data"), "--origin", origin, "--json"))
        self.log_key: str = self.info["verifier_key"]
        self.origin: str = self.info["origin"]
        self.admin_key = custody.load_private_key(Path(self.info["admin_key_file"]).read_bytes())
        self.server = Server(["--dir", os.path.join(self.dir, "data"), *(extra or [])])
        if serve:
            self.server.start()

    @property
    def url(self) -> str:
        return self.server.url

    def restart(self) -> None:
        self.server.stop()
        self.server.start()

    def close(self) -> None:
        self.server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self, **kw: Any) -> custody.Client:
        return custody.Client(self.url, log_key=self.log_key, **kw)

    def aclient(self, **kw: Any) -> custody.AsyncClient:
        return custody.AsyncClient(self.url, log_key=self.log_key, **kw)

    def admin(self, client: custody.AsyncClient) -> custody.Runtime:
        return custody.Runtime(client, self.admin_key, name=self.info["admin_name"])

    async def principal(self, name: str, client: custody.AsyncClient) -> custody.Runtime:
        key = custody.generate_key()
        await self.admin(client).append_or_raise({"type": "PRINCIPAL", "principal_id": custody.new_id("p"), "op": "enroll",
                                                   "name": name, "public_key": key.public_key_base64})
        return custody.Runtime(client, key, name=name)

    async def agent(self, principal: custody.Runtime, name: str, workflow: str, **grant: Any) -> tuple[custody.Runtime, str]:
        key = custody.generate_key()
        gid = custody.new_id("confirm")
        spec = {"targets": ["t/*"], "capabilities": ["act"], "ttl_seconds": 600, "revocable": True, **grant}
        await principal.confirm(id=gid, workflow=workflow, grantee=name, grantee_key=key.public_key, **spec)
        return custody.Runtime(principal.client, key, name=name), gid
