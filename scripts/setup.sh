#!/usr/bin/env bash
# Idempotent set-up, shared by scripts/run.sh and scripts/test.sh.
#   scripts/setup.sh run   system packages the app needs, virtualenv, Python and npm packages, assets
#   scripts/setup.sh test  the same, plus PostgreSQL and Chromium for the test suite
#   scripts/setup.sh docs  the virtualenv with the app and the docs extra only (scripts/docs.sh): the site's
#                          build imports the app, never torch, and needs no system or front-end packages
# Each step is skipped when it is already done (stamps in .venv/ and node_modules/).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "need root to run: $*" >&2; return 1; fi
}

apt_packages=(bubblewrap libseccomp2)  # libseccomp2: the ranks' seccomp filter (labs/host/seccomp.py)
[ "$mode" = test ] && apt_packages+=(postgresql chromium)
# pg_dump and pg_restore for `ringlab db backup/restore` where the app runs on PostgreSQL.
case "${DATABASE_URL:-${RINGLAB_DATABASE_URL:-}}" in postgres*) apt_packages+=(postgresql-client) ;; esac
[ "$mode" = docs ] && apt_packages=()
missing=()
for pkg in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing system packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  say "creating virtualenv .venv"
  "$python" -m venv .venv
fi
# The worker extra brings torch: `ringlab serve` grades labs with an embedded worker.
case "$mode" in test) extras="[dev,worker,docs]" ;; docs) extras="[docs]" ;; *) extras="[worker]" ;; esac
stamp=".venv/.installed-$(cat pyproject.toml | sha256sum | cut -c1-16)-${mode}"
# The test set-up installs the docs extra too: after it, the docs need nothing more.
[ "$mode" = docs ] && [ -f "${stamp%-docs}-test" ] && stamp="${stamp%-docs}-test"
if [ ! -f "$stamp" ]; then
  say "installing Python packages"
  .venv/bin/pip install -q --disable-pip-version-check -e ".${extras}"
  touch "$stamp"
fi

[ "$mode" = docs ] && exit 0  # the site uses none of the app's front-end assets

lock_stamp="node_modules/.installed-$(cat package.json package-lock.json | sha256sum | cut -c1-16)"
if [ ! -f "$lock_stamp" ]; then
  say "installing front-end packages (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error
  touch "$lock_stamp"
fi
# Built into static/vendor/ from node_modules, never committed. Copied on every run (cheap), so a
# checkout whose package-lock.json gained a library gets its files once the stamp above re-runs npm ci.
mkdir -p static/vendor/htmx static/vendor/pico static/vendor/codemirror static/vendor/swagger-ui
cp node_modules/htmx.org/dist/htmx.min.js static/vendor/htmx/
cp node_modules/@picocss/pico/css/pico.min.css static/vendor/pico/
# CodeMirror 5 ships plain UMD files: the core, the Python mode and the bracket-matching addon.
cp node_modules/codemirror/lib/codemirror.js node_modules/codemirror/lib/codemirror.css \
  node_modules/codemirror/mode/python/python.js node_modules/codemirror/addon/edit/matchbrackets.js \
  static/vendor/codemirror/
# Swagger UI for /api/docs: the prebuilt bundle and its stylesheet, served under the app's own CSP.
cp node_modules/swagger-ui-dist/swagger-ui-bundle.js node_modules/swagger-ui-dist/swagger-ui.css static/vendor/swagger-ui/
