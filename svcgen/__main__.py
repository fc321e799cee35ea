"""`python -m svcgen` and the `svcgen` console script: the command line."""

import sys


def main() -> None:
    # Loading the command line takes a moment (~0.3 s); a Ctrl-C then ends it as one arriving later does, in
    # click's words, not with a traceback from the middle of an import.
    try:
        from .cli import main as command_line
    except KeyboardInterrupt:
        print("\nAborted!", file=sys.stderr)
        raise SystemExit(1) from None
    command_line()


if __name__ == "__main__":
    main()
