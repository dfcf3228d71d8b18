#!/usr/bin/env bash
# The documentation site (docs/, mkdocs.yml), with the lab catalogue and the HTTP API reference
# generated from content/labs/ and the app's OpenAPI document at build time (docs/hooks/).
#   scripts/docs.sh         serve it at http://127.0.0.1:8001, rebuilt on every change to docs/ or content/
#   scripts/docs.sh build   build it strictly (any warning fails) into build/site/
set -euo pipefail
cd "$(dirname "$0")/.."
# The docs extra and the app's own packages; no torch, no system packages, no npm.
scripts/setup.sh docs
export NO_MKDOCS_2_WARNING=1  # mkdocs-material's banner about its successor, on every run
case "${1:-serve}" in
  # Warnings are printed, not fatal, while writing: mkdocs.yml's strict would stop the server at the first.
  serve) exec .venv/bin/mkdocs serve --no-strict -a 127.0.0.1:8001 ;;
  build) exec .venv/bin/mkdocs build --strict ;;
  *) echo "usage: scripts/docs.sh [serve|build]" >&2; exit 2 ;;
esac
