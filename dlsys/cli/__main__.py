"""``python -m dlsys.cli``."""

import sys

from . import main

sys.exit(main())
