"""`python -m convtap`: the same as the `convtap` command."""

from convtap.cli import main

main()
