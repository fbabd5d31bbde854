"""The script mitmproxy loads from a checkout: `mitmdump -s addon/mitm.py` (or `mitmweb -s …`).
mitmproxy puts this folder first on sys.path, so `convtap` is the package beside this file; an
installed convtap names its own copy with `convtap mitm-script`."""

from convtap.proxy.script import addons

__all__ = ["addons"]
