"""``python -m envforge`` and the ``envforge`` console script: the CLI, imported here.

A Ctrl-C in the first tens of milliseconds, while the CLI's modules are still being imported, is
the same one line and exit 130 as a Ctrl-C later (``error: interrupted``), never a traceback.
"""

import sys


def run() -> None:
    """Import the CLI and run it (:func:`envforge.cli.run`); exit 130 when interrupted while importing."""
    try:
        from envforge.cli import run as cli  # lazy: inside the guard, so an early Ctrl-C is caught
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(130) from None
    cli()


if __name__ == "__main__":
    run()
