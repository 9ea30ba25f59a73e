"""`python -m planops.uiserver`: the UI server (uiserver/main.py)."""

import sys

from planops.uiserver.main import main

sys.exit(main())
