"""The hand-off from the proxy to the recorder process: the frozen events a recorder is fed
(`events`), the append-only segment files that carry them without ever losing one (`segments`),
and the proxy's half (`backend`: append, start the recorder process, wait for it), importable
without the recorder. May import `wire` and `models` only."""
