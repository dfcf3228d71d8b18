#!/usr/bin/env bash
# One command from a fresh clone to a running app on the embedded default
# (SQLite in ./data): set-up, database migrated, content synced, then serve.
#   HOST=0.0.0.0 PORT=8000 scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh run
.venv/bin/ringlab db upgrade
.venv/bin/ringlab content sync
exec .venv/bin/ringlab serve --host "${HOST:-127.0.0.1}" --port "${PORT:-8000}"
