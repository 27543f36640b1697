"""`python -m experiments.calibrate` for one more release: the command is `ragtune calibrate`."""

import sys

from experiments.tuning.calibrate import main

if __name__ == "__main__":
    sys.exit(main())
