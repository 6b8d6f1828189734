"""`python -m webhook` / `repack-webhook`: the mutating webhook's process (webhook.admission.serve)."""
from __future__ import annotations

import sys

from webhook.admission.serve import main

if __name__ == "__main__":
    sys.exit(main())
