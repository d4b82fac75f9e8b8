import sys

from labcore.cli import main

sys.exit(main())
