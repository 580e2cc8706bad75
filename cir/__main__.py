import sys

from cir.cli import console

sys.exit(console())
