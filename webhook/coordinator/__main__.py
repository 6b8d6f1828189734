"""`python -m webhook.coordinator`: the placement coordinator (webhook.coordinator.loop)."""
from __future__ import annotations

import sys

from webhook.coordinator.loop import main

if __name__ == "__main__":
    sys.exit(main())
