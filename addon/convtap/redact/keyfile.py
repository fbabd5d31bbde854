"""The redaction key: random per installation (`~/.config/convtap/redaction.key`, made 0600 on
first use, `$XDG_CONFIG_HOME` respected), so nobody can test a guess against a placeholder
without it; `CONVTAP_REDACT_KEY` sets one key for a team whose captures must compare."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

# -- the key ---------------------------------------------------------------------------------------


def key_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "convtap" / "redaction.key"


def redaction_key() -> bytes:
    """CONVTAP_REDACT_KEY, else this installation's own random key (made on first use)."""
    shared = os.environ.get("CONVTAP_REDACT_KEY")
    if shared:
        return shared.encode()
    path = key_file()
    with contextlib.suppress(FileNotFoundError):
        return _read_key(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # made by another convtap process a moment ago
        return _read_key(path)
    import secrets  # (only here: every other start reads the key)

    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32) + "\n")
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    key = path.read_text().strip()
    if not key:
        raise OSError(f"{path} is empty")
    return key.encode()
