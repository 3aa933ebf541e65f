"""Runs N gated steps (Runtime.execute, a step that does nothing) through the Python SDK,
C at a time in one process, and prints "steps N seconds S"."""

import asyncio
import os
import sys
import time
from pathlib import Path

import custody


async def main(n: int, conc: int) -> None:
    env = os.environ
    client = custody.AsyncClient(env["CUSTODY_URL"], log_key=env["CUSTODY_LOG_KEY"])
    rt = custody.Runtime(client, custody.load_private_key(Path(env["CUSTODY_AGENT_KEY"]).read_bytes()), name=env["CUSTODY_AGENT_NAME"])
    counter = iter(range(1, n + 1))

    async def worker() -> None:
        for i in counter:
            await rt.execute(custody.Step(f"s{i}", "act", "t/x", env["CUSTODY_GRANT"]), lambda ctx: None)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    print(f"steps {n} seconds {time.perf_counter() - start:.3f}")
    await client.aclose()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 600, int(sys.argv[2]) if len(sys.argv) > 2 else 32))
