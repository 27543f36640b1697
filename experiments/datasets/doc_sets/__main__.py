"""`python -m experiments.datasets.doc_sets ...`: the same as `ragtune doc-sets ...`."""

import sys

from experiments.datasets.doc_sets.cli import main

sys.exit(main())
