"""`python3 -m toolkit.steps > docs/step-kinds.md`: the reference of every step kind."""

import sys

from toolkit.steps import reference

sys.stdout.write(reference())
