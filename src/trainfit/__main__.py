"""`python -m trainfit` runs the CLI."""

from trainfit.cli.launch import entry

if __name__ == "__main__":  # NB: not again in a plan's worker process (spawn imports __main__)
    entry()
