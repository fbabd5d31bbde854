"""`convtap run` and `convtap record`: the proxy and the commands it records, started and wired.

`env` makes the command's environment (the proxy variables, a CA bundle that trusts mitmproxy's
CA, each known client's own switches); `run` starts `convtap record` in front of it, runs the
command, forwards the signals and sums the capture up. It starts the recorder as a process (the
`convtap record` a user types), so it imports no CLI. `recording` is what `convtap record` does:
mitmproxy run with convtap's addon, the live page and the traces beside it, or the journal
caught up. May import every layer below it; never the CLI or the mock.
"""
