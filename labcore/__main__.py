import sys

from labcore.cli.main import main

sys.exit(main())
