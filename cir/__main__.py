import sys

from cir.cli import main

sys.exit(main())
