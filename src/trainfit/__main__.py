"""`python -m trainfit` runs the CLI."""

import sys

from trainfit.cli.main import main

if __name__ == "__main__":  # NB: not again in a plan's worker process (spawn imports __main__)
    sys.exit(main())
