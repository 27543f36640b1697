"""Where ragtune's checkout and its data cache are, worked out once for the config, the commands and the components."""

import os
from pathlib import Path

# The checkout: conf/, data/ and docs/ are found from here, wherever a command runs from.
PROJECT_DIR = Path(__file__).resolve().parents[2]
CACHE_ENV = "RAGTUNE_CACHE"
DEFAULT_CACHE = ".cache/ragtune"


def cache_root() -> Path:
    """`$RAGTUNE_CACHE`, else `.cache/ragtune` (relative to the working directory): conf/config.yaml's
    `paths.cache`, for the code that runs without Hydra, read at each call so a changed environment counts."""
    return Path(os.environ.get(CACHE_ENV, DEFAULT_CACHE))
