"""`python -m experiments.gate` for one more release: the command is `ragtune gate`."""

import sys

from experiments.comparison.gate import main

if __name__ == "__main__":
    sys.exit(main())
