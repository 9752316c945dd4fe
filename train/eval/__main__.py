"""``python -m train.eval``: the evaluation command (:mod:`train.eval.cli`)."""

import sys

from .cli import main

sys.exit(main())
