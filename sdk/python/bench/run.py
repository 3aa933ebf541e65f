"""Gated steps per second of the Go, TypeScript and Python runtimes against one
local custody server (Badger, loopback), in the same run, each runtime one
process running C steps at a time, and the CPU time each runtime's process
spends per step (user + system, from wait4; the server is another process).

    python sdk/python/bench/run.py [N] [C]        (defaults: 600 steps, 32 at once)

Needs Go (it builds custody and bench/gosteps) and Node with the TypeScript
SDK built (sdk/typescript: npm ci && npm run build) for the TypeScript row.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from harness import REPO, Ledger  # noqa: E402

import custody  # noqa: E402


def child(cmd: list[str], env: dict) -> tuple[float, float, int]:
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, ru = os.wait4(p.pid, 0)
    out, err = p.stdout.read(), p.stderr.read()  # type: ignore[union-attr]
    if os.waitstatus_to_exitcode(status) != 0:
        lines = err.splitlines()
        line = next((x for x in lines if x.lstrip().startswith(("NotExecutedError", "custody.")) or "Error:" in x), err.strip()[-300:])
        raise RuntimeError(line.strip()[:300])
    parts = out.split()
    return float(parts[3]), ru.ru_utime + ru.ru_stime, int(parts[1])


async def grant(lg: Ledger, c: custody.AsyncClient, alice: custody.Runtime, wf: str, tmp: Path) -> dict:
    rt, gid = await lg.agent(alice, f"agent:{wf}", wf)
    key = tmp / f"{wf}.key"
    key.write_bytes(rt.key.to_pem())
    return dict(os.environ, CUSTODY_URL=lg.url, CUSTODY_LOG_KEY=lg.log_key, CUSTODY_AGENT_KEY=str(key),
                CUSTODY_AGENT_NAME=f"agent:{wf}", CUSTODY_GRANT=gid)


async def main(n: int, conc: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="custody-py-bench-"))
    gobin = tmp / "gosteps"
    subprocess.run(["go", "build", "-o", str(gobin), "./sdk/python/bench/gosteps"], cwd=REPO, check=True)
    lg = Ledger(origin="example.com/py-bench")
    c = lg.aclient()
    try:
        alice = await lg.principal("user:alice", c)
        runs = [("Go (client.Runtime)", "wf_go", [str(gobin), "-n", str(n), "-c", str(conc)])]
        dist = REPO / "sdk/typescript/dist/index.js"
        if dist.exists():
            runs.append(("TypeScript (Runtime)", "wf_ts", ["node", str(HERE / "ts_steps.mjs"), str(dist), str(n), str(conc)]))
        runs.append(("Python (Runtime)", "wf_py", [sys.executable, str(HERE / "py_steps.py"), str(n), str(conc)]))
        print(f"{n} gated steps, {conc} at once, one process each, one server (Badger) on loopback; "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
        print("| runtime | steps/s | CPU of the runtime's process per step |")
        print("|---|---:|---:|")
        for name, wf, cmd in runs:
            env = await grant(lg, c, alice, wf, tmp)
            try:
                secs, cpu, steps = child(cmd, env)
            except RuntimeError as e:
                print(f"| {name} | failed: {e} | |")
                continue
            print(f"| {name} | {steps / secs:,.0f} | {cpu / steps * 1000:.2f} ms |")
    finally:
        await c.aclose()
        lg.close()

if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 600, int(sys.argv[2]) if len(sys.argv) > 2 else 32))
