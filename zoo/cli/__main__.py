"""`python -m zoo.cli`, the same as `python -m zoo` and the `zoo` console script."""

import sys

from zoo.cli.main import main

sys.exit(main())
