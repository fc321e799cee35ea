"""`python -m svcgen`: the command line."""

from .cli import main

main()
