"""``python -m simcoll`` runs the command line."""

import sys

from simcoll.cli import main

sys.exit(main())
