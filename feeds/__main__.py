"""`python -m feeds`: the same program as `dns-analytics-feed`."""

from .cli import main

main()
