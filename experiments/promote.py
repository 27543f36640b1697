"""`python -m experiments.promote` for one more release: the command is `ragtune promote`."""

import sys

from serving.promote import main

if __name__ == "__main__":
    sys.exit(main())
