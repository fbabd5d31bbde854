"""`convtap run`: a command run with its clients recorded, no wiring.

`env` makes the command's environment (the proxy variables, a CA bundle that trusts mitmproxy's
CA, each known client's own switches); `run` starts `convtap record` in front of it, runs the
command, forwards the signals and sums the capture up. It starts the recorder as a process (the
`convtap record` a user types), so it imports no CLI, and below it only the store and the ingest
readers.
"""
