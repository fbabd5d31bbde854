"""convtap: an intercepting proxy and protocol recorder for ChatGPT's conversation backend.

The package is cut in layers, each importing only the ones below it (import-linter checks this
in `make lint`):

    cli       the `convtap` command: parse, call one library function, render
    mock      the local upstream, its scenarios, the reference client, the demo
    diff      shapes of captures and what changed between them
    proxy     the mitmproxy addon: recognise, tap, hand events to the recorder
    record    the recorder (fed typed events), redaction, the store, readers of capture files
    contract  the rules (one function per rule id), the audit, report formats
    wire      SSE framing, delta v1, the WebSocket turn topic, turns, the Responses stream
    models    pydantic models of the wire types
"""
