"""``python3 -m verify.kinds``: print the README's gate table from the registry."""

import sys

from . import readme_table

sys.stdout.write(readme_table())
