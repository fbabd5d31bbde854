"""The mitmproxy addon: it recognises the conversation endpoints, taps their streams without
holding a byte, and hands events to the recorder. The only layer that knows mitmproxy's hooks.
May import `record` and `wire`."""
