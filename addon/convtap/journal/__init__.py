"""The hand-off from the proxy to the recorder process: the frozen events a recorder is fed
(`events`, made from mitmproxy's flows by `flows`), the append-only segment files that carry them
without ever losing one (`segments`), and the proxy's half (`backend`: append, start the recorder
process, wait for it), importable without the recorder. May import `wire`, `models` and
mitmproxy only."""

from pathlib import Path

# Where a capture goes unless told: what the proxy's option and the CLI's --db say, read without
# loading the database's modules.
DEFAULT_DB = Path("captures") / "capture.db"
