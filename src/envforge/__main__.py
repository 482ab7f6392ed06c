"""``python -m envforge``: the same as the ``envforge`` console script."""

from envforge.cli import run

run()
