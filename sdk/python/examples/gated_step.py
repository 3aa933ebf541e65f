"""A gated step with the Runtime: the step runs only once its pending receipt is
durable and verified (and, if a rule holds it, approved by the people the
grant names: the runtime waits and checks their APPROVALs itself); a STOP
cancels it; its outcome is always recorded.

The grant must allow capability "purchase" on target "airline_portal/account_123"
with a budget_usd limit. Run (see _env.py for the variables):

    python examples/gated_step.py
"""

import asyncio

import custody
from _env import runtime


async def book(ctx: custody.StepContext) -> custody.Outcome:
    # The irreversible work. A STOP covering this step cancels this coroutine.
    await asyncio.sleep(0.1)
    return custody.Outcome(consumed={"budget_usd": 742}, side_effects={"booking": "PNR-7Q2X"})


async def main() -> int:
    rt, grant = runtime()
    step = custody.Step("step_3", "purchase", "airline_portal/account_123", grant, reserve={"budget_usd": 742},
                        params={"flight": "LH400", "price_usd": 742})
    try:
        ex = await rt.execute(step, book)
    except custody.NotExecutedError as e:
        print("not executed:", e.reason_code, "-", e)
        return 1
    except custody.StoppedError as e:
        print("stopped:", e)
        return 1
    finally:
        await rt.client.aclose()
    held = " after approval by " + str(ex.approval.approved_by) if ex.approval else ""
    print(f"done{held}; outcome at index {ex.outcome.index if ex.outcome else '?'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
