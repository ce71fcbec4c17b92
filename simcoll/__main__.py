"""``python -m simcoll`` runs the command line."""

from simcoll.cli import entry

entry()
