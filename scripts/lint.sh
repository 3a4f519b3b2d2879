#!/usr/bin/env bash
# ruff (lint and format) on the whole tree, and mypy --strict on the four source folders as
# installed (gangplan.models, gangplan.topology, gangplan.solver, gangplan.adapters): the root
# folders only become gangplan.* packages when installed, so they are copied to a temporary
# folder (the checkout keeps no build/ leftovers) and installed there, non-editable.
# Needs the lint extra, from a fresh virtual environment too: pip install -e '.[lint]'
# (it brings ruff, mypy, the type stubs, and setuptools>=77 for this install, which reuses
# the environment's setuptools: --no-build-isolation, no download).
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check models topology solver adapters tests scripts
ruff format --check models topology solver adapters tests scripts
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
cp -R pyproject.toml README.md LICENSE models topology solver adapters instances "$tmp/src"
pip install --quiet --no-deps --no-build-isolation --target "$tmp/site" "$tmp/src" >/dev/null
cd "$tmp"
MYPYPATH="$tmp/site" mypy --strict --config-file "$OLDPWD/pyproject.toml" \
  -p gangplan.models -p gangplan.topology -p gangplan.solver -p gangplan.adapters
