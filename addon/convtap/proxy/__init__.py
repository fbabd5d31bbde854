"""The mitmproxy addon: it recognises the conversation endpoints, taps their streams without
holding a byte, and hands events to the recorder (through the journal). The only layer that
knows mitmproxy's hooks. May import `journal`, `ingest.decoding` (the content view) and `wire`;
never the recorder, redaction, the store or the rules, but in `script`, which assembles the
addon with a recorder in mitmproxy's own process when one is configured."""

from importlib import resources

MITM_SCRIPT = resources.files(__name__) / "script.py"  # what `mitmdump -s` loads to record
