"""The wire core: SSE framing, delta encoding v1, the WebSocket turn topic, turns and their tool
calls, the Responses API stream, finished messages checked against their models (`typed`). Pure
and sans-I/O (bytes and values in, values out), in the style of h11: no sockets, files, SQLite or
mitmproxy. May import `convtap.models` and `convtap.vocab` only."""
