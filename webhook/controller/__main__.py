"""`python -m webhook.controller`: the RepackRun controller (webhook.controller.loop)."""
from __future__ import annotations

import sys

from webhook.controller.loop import main

if __name__ == "__main__":
    sys.exit(main())
