"""convtap: an intercepting proxy and protocol recorder for ChatGPT's conversation backend and
the OpenAI Responses API.

The package is cut in layers, each importing only the ones below it (import-linter checks this
in `make lint`; docs/architecture.md says why each exists):

    cli                 the `convtap` command, one module per family of commands
    mock                the local upstream, its scenarios, the reference client, the demo
    diff, proxy, report shapes of captures and what changed; the mitmproxy addon; the HTML page
    ingest, export      readers of capture files, replay and `decode`; the HAR export
    record              the recording pipeline per protocol and the recorder process
    telemetry           what an answer cost; a capture as OpenTelemetry spans, sent live
    journal, store      the proxy-to-recorder hand-off on disk; the capture database (all SQL)
    redact, contract    what is secret and how it is replaced; the rules and the audit
    wire                SSE framing, delta v1, the WebSocket turn topic, the Responses stream,
                        finished messages checked against their models
    models              pydantic models of the wire types
    vocab               the words every layer shares (StrEnums), each written once: any
                        layer imports it, it imports nothing of convtap's
"""
