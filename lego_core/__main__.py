"""``python -m lego_core``: the command line (see ``lego_core.cli``)."""
from lego_core.cli import main

raise SystemExit(main())
