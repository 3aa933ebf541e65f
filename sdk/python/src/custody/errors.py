"""Errors a caller can act on, each with a stable ``code`` (the ledger's reason codes where they overlap)."""

from __future__ import annotations


class CustodyError(Exception):
    """Base class of every error this SDK raises on purpose."""

    code = "custody"


class CustodyFormatError(CustodyError, ValueError):
    """A value or statement that breaks the strict profile or a schema.

    ``code`` is ``non_canonical``, ``schema_invalid`` or ``bad_envelope``;
    ``path`` says where (``scope.targets[1]``; ``""`` for the whole).
    """

    def __init__(self, code: str, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.code = code
        self.path = path
        self.detail = message


class CustodyKeyError(CustodyError, ValueError):
    """A key that cannot be used: not PKCS#8 Ed25519, a wrong passphrase, a small-order public key."""

    code = "bad_key"


class SignatureError(CustodyError):
    """An envelope whose signature does not verify under the key given (``reason`` says which rule failed)."""

    code = "bad_signature"

    def __init__(self, message: str, reason: str = "bad_signature") -> None:
        super().__init__(message)
        self.reason = reason


class UnverifiedError(CustodyError):
    """An answer of the ledger that failed verification: never trust it."""

    code = "unverified"

    def __init__(self, message: str) -> None:
        super().__init__(f"the ledger's answer does not verify: {message}")


class HTTPError(CustodyError):
    """An answer that is neither a decision nor a refusal: overloaded, down, not found. Nothing was acknowledged."""

    code = "http"

    def __init__(self, status: int, reason_code: str, reason: str, retry_after: float = 0.0, leader: str = "") -> None:
        if reason_code:
            msg = f"ledger server: HTTP {status}: {reason_code}: {reason}"
        else:
            msg = f"ledger server: HTTP {status}" + (f": {reason}" if reason else "")
        super().__init__(msg)
        self.status = status
        self.reason_code = reason_code
        self.reason = reason
        self.retry_after = retry_after
        self.leader = leader


class RefusedError(CustodyError):
    """The ledger refused the submission without logging it (malformed, unknown key, bad signature, too large)."""

    code = "refused"

    def __init__(self, status: int, reason_code: str, reason: str) -> None:
        super().__init__(f"refused: {reason_code}: {reason} (nothing was logged)")
        self.status = status
        self.reason_code = reason_code
        self.reason = reason


class NotWitnessedError(CustodyError):
    """A pending RECEIPT logged, but no checkpoint meeting the witness policy covered it in time.
    ``result`` is its verified (unwitnessed) answer: the entry is in the log; never act on it."""

    code = "not_witnessed"
    result: object = None
