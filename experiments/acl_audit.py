"""`python -m experiments.acl_audit` for one more release: the command is `ragtune audit`."""

import sys

from serving.acl_audit import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
