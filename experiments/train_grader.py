"""`python -m experiments.train_grader` for one more release: the command is `ragtune train-grader`."""

import sys

from experiments.tuning.train_grader import main

if __name__ == "__main__":
    sys.exit(main())
