"""`python -m mirai.cli`: the `mirai` command."""

import sys

from mirai.cli import main

sys.exit(main())
