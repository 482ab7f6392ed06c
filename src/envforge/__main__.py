"""``python -m envforge``: the same as the ``envforge`` console script."""

import sys

from envforge.cli import main

sys.exit(main())
