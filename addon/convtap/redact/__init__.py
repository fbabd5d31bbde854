"""What is secret on this wire and how it is replaced (docs/protocol.md, "Secrets on this
wire"): the patterns and the redactor (`redactor`), and streams redacted as they are stored,
with secrets cut across events put back together (`stream`). Pure: may import `wire` only."""
