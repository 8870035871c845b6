"""python -m scheduling.simulator.run run|generate ..."""

import sys

from . import main

sys.exit(main())
