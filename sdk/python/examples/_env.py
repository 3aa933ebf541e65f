"""What every example reads from its environment: the ledger and the agent's key and grant.

    CUSTODY_URL        the server(s), comma-separated (default http://127.0.0.1:8080)
    CUSTODY_LOG_KEY    the log's checkpoint verifier key: `custody checkpoint --dir ./custody-data --verifier-key`
    CUSTODY_AGENT_KEY  the agent's PKCS#8 PEM key file (the grantee of CUSTODY_GRANT)
    CUSTODY_AGENT_NAME the agent's name in the log (omitted: asked of the ledger)
    CUSTODY_GRANT      the id of the CONFIRM or DELEGATE the agent acts under
    CUSTODY_PASSPHRASE the key's passphrase, if it has one
"""

import os
from pathlib import Path

import custody


def runtime() -> tuple[custody.Runtime, str]:
    client = custody.AsyncClient(os.environ.get("CUSTODY_URL", "http://127.0.0.1:8080"), log_key=os.environ["CUSTODY_LOG_KEY"])
    key = custody.load_private_key(Path(os.environ.get("CUSTODY_AGENT_KEY", "agent.key")).read_bytes(), os.environ.get("CUSTODY_PASSPHRASE"))
    hooks = custody.Hooks(emit_receipt=lambda a: print(f"ledger: {a.verdict} at index {a.index}" + (f" ({a.reason_code})" if a.reason_code else "")))
    return custody.Runtime(client, key, name=os.environ.get("CUSTODY_AGENT_NAME", ""), hooks=hooks), os.environ["CUSTODY_GRANT"]
