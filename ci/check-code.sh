#!/usr/bin/env bash
# The code's own checks, as pre-commit runs them: ruff lint and format (ruff.toml), mypy (mypy.ini).
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/step.sh
ruff check .
ruff format --check .
step "mypy" mypy
