"""`python -m trainfit` runs the CLI."""

import sys

from trainfit.cli.main import main

sys.exit(main())
