from convtap.cli import main

main()
