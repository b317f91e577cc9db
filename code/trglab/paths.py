"""Where things live: the repository root and its folders."""

import os
from pathlib import Path


def repo_root():
    """The book's root folder (env TRGLAB_ROOT, else two levels above this package)."""
    env = os.environ.get("TRGLAB_ROOT")
    return Path(env) if env else Path(__file__).resolve().parents[2]


def data_dir():
    return repo_root() / "data"
