"""The report: one self-contained HTML page of a capture (`convtap report`), its summary, each
conversation's turns with their calls, returns and findings, and the rules explained, written
row by row as the capture is read. May import `record` (to read captures), `contract`, `wire`
and `models`; never `mock`, `proxy`, `diff` or the CLI."""
