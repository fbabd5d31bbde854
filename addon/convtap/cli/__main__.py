"""`python -m convtap.cli`: the same as the `convtap` command."""

from convtap.entry import main

main()
