"""What is secret on this wire, and how it is replaced (PROTOCOL.md "Secrets on this wire").

Redaction is structural: a secret is recognised by where it sits (a JSON key, a header name, a
query parameter), never by pattern-matching text. It is replaced by a placeholder that carries a
short keyed hash of the secret, so that reuse (a replayed challenge, one token across flows) stays
detectable while the secret does not. The key comes from CONVTAP_REDACT_KEY when set.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Any

PLACEHOLDER_PREFIX = "<redacted:"
DEFAULT_KEY = b"convtap redaction v1"

# JSON object keys whose string (or object) values are secret wherever they appear.
SECRET_KEYS = frozenset(
    {
        "token",
        "access_token",
        "refresh_token",
        "session_token",
        "conduit_token",
        "app_attest_challenge",
        "authorization",
        "cookie",
        "set-cookie",
        "x-conduit-token",
    }
)


def redaction_key() -> bytes:
    env = os.environ.get("CONVTAP_REDACT_KEY")
    return env.encode() if env else DEFAULT_KEY


class Redactor:
    """Replaces secrets by `<redacted:HASH>`; the same secret always gets the same HASH."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = redaction_key() if key is None else key

    def placeholder(self, secret: str | bytes) -> str:
        raw = secret.encode() if isinstance(secret, str) else secret
        digest = hmac.new(self._key, raw, hashlib.sha256).hexdigest()[:12]
        return f"{PLACEHOLDER_PREFIX}{digest}>"

    def json(self, value: Any) -> Any:
        """A copy of a JSON value with every secret replaced (the input is not changed)."""
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if _is_secret_key(key) and item is not None and not _is_placeholder(item):
                    out[key] = self.placeholder(_secret_text(item))
                else:
                    out[key] = self.json(item)
            return out
        if isinstance(value, list):
            return [self.json(item) for item in value]
        return value


def _is_secret_key(key: object) -> bool:
    if not isinstance(key, str):
        return False
    lowered = key.lower()
    return lowered in SECRET_KEYS or lowered.endswith("_token")


def _is_placeholder(value: object) -> bool:
    return isinstance(value, str) and value.startswith(PLACEHOLDER_PREFIX)


def _secret_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
