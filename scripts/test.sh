#!/usr/bin/env bash
# One command from a fresh clone to the whole test suite: set-up (system
# packages incl. PostgreSQL and Chromium, virtualenv, npm assets), then lint,
# type-check and pytest against SQLite and a throwaway PostgreSQL cluster.
#   scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
echo "==> ruff" >&2
.venv/bin/ruff check .
.venv/bin/ruff format --check --quiet .
echo "==> mypy" >&2
# app/, labs/ and the labs' checks, drivers and shared helpers in one run: torch's types are read once
.venv/bin/python scripts/typecheck_labs.py --with-project
echo "==> import contracts" >&2
.venv/bin/lint-imports --no-cache
echo "==> content check" >&2
.venv/bin/ringlab content check
echo "==> docs" >&2
# The site, strictly: a broken link, a page missing from the nav or a lab the catalogue cannot load fails here.
# Its log only when it fails. Not `-q`: that drops mkdocs's warnings before --strict counts them.
log=$(NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict 2>&1) || { echo "$log" >&2; exit 1; }
echo "==> pytest" >&2
# Two test processes (RINGLAB_TEST_WORKERS), each file kept on one of them: much of the suite waits on
# servers, workers and browsers, so two keep a 2-core machine busy; each starts its own PostgreSQL.
# The 25 slowest tests close the report: where the suite's time goes, run by run.
exec .venv/bin/pytest -n "${RINGLAB_TEST_WORKERS:-2}" --dist loadfile --durations=25 "$@"
