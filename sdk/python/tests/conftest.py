import os
import sys
from pathlib import Path
from typing import AsyncIterator, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from harness import Ledger  # noqa: E402


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    lg = Ledger()
    try:
        yield lg
    finally:
        lg.close()


@pytest.fixture
async def aclient(ledger: Ledger) -> AsyncIterator:
    c = ledger.aclient()
    try:
        yield c
    finally:
        await c.aclose()


def require(what: str, ok: bool) -> None:
    """Skips without a real component, unless CI is set: then fails."""
    if ok:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {what} is missing")
    pytest.skip(f"{what} is missing")
