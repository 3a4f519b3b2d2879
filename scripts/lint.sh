#!/usr/bin/env bash
# ruff on the sources, and mypy --strict on the *installed* layout (gangplan.models,
# gangplan.topology, gangplan.solver): a non-editable install into a temporary folder, since
# the root folders only become gangplan.* packages when installed.
# Needs the lint extra: pip install -e '.[lint]'
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check models topology solver
ruff format --check models topology solver
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pip install --quiet --no-deps --no-build-isolation --target "$tmp/site" . >/dev/null
cd "$tmp"
MYPYPATH="$tmp/site" mypy --strict --config-file "$OLDPWD/pyproject.toml" \
  -p gangplan.models -p gangplan.topology -p gangplan.solver
