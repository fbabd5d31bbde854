"""What is secret on this wire and how it is replaced (docs/protocol.md, "Secrets on this
wire"): what a secret looks like and where it sits, and the cheap look for hints of one
(`patterns`); the installation's key (`keyfile`); the replacement in values, JSON, headers, URLs
and SSE text (`redactor`); JSON escapes undone with where each character came from (`escapes`);
streams redacted as they are stored, with secrets cut across events put back together (`stream`),
and a WebSocket's frames, whose stream items no decoder reads (`frames`). Pure but for reading the
key: may import `wire` only."""
