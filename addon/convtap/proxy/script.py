"""The script an installed convtap gives mitmproxy: `mitmdump -s "$(convtap mitm-script)"`.

Where the addon is assembled: with `convtap_worker=false` it records in mitmproxy's own process,
through the recorder made here, whose modules load only then (the addon itself loads none)."""

from convtap.journal.backend import RecorderRefused
from convtap.proxy.addon import Backend, ConvtapAddon


def in_process(db: str, redact: bool, echo: str) -> Backend:
    """The recorder and its writer in this process, for `db`."""
    from convtap.record.local import LocalRecorder
    from convtap.store.errors import StoreError

    try:
        return LocalRecorder(db, redact=redact, echo=echo)
    except StoreError as exc:
        raise RecorderRefused(str(exc)) from None


addons = [ConvtapAddon(in_process)]
