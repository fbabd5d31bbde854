"""Recording: the recorder fed typed events (per protocol), redaction, the store (the only place
that speaks SQL), the recorder process, and the readers of capture files (.mitm, HAR, .sse,
other capture databases). May import `contract`, `wire` and `models`, and mitmproxy's flow
types (never its addon API)."""
