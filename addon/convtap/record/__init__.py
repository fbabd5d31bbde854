"""Recording: the pipeline fed typed events, live or offline (`recorder`, one side per protocol:
`conversation`, `responses`), where its rows, echo lines and findings go (`output`), mitmproxy
flows as events (`flows`), and the recorder in this process (`local`) or in its own, fed by the
journal (`worker`). May import `telemetry`, `journal`, `store`, `redact`, `contract`, `wire`
and `models`, and mitmproxy's flow types (never its addon API)."""
