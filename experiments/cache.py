"""`python -m experiments.cache` for one more release: the command is `ragtune cache`."""

import sys

from experiments.runs.cache import main

if __name__ == "__main__":
    sys.exit(main())
