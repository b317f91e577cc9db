"""``python -m trglab <command> ...``: see ``trglab.cli`` for the commands."""

import sys

from .cli import main

sys.exit(main())
