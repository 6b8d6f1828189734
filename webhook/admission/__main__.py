"""`python -m webhook.admission`: the same process as `python -m webhook`."""
from __future__ import annotations

import sys

from webhook.admission.serve import main

if __name__ == "__main__":
    sys.exit(main())
