"""`python -m experiments.compare` for one more release: the command is `ragtune compare`."""

import sys

from experiments.comparison.compare import main

if __name__ == "__main__":
    sys.exit(main())
