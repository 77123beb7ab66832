import sys

from arrowlog.cli import main

sys.exit(main())
