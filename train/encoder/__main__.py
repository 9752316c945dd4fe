"""``python -m train.encoder``: see :mod:`train.encoder.build`."""

from .build import main

raise SystemExit(main())
