"""``python -m tollfree ARGS``: the C program, as the ``tollfree`` console script runs it."""
from tollfree._cli import main

raise SystemExit(main())
