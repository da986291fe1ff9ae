#!/usr/bin/env bash
# Builds the dashboard's page into plugin/dashboard/web/dist: the npm
# registry's packages at the versions the committed lockfile pins (npm ci,
# only when the lockfile changed since the last install), then esbuild.
# "hack/web.sh check" type-checks the sources with tsc instead.
# A lock keeps two builds (make test's prefetch and its build) from sharing
# node_modules at once.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
web=$root/plugin/dashboard/web
cache=${TESTBIN:-$root/.testbin}/npm
exec {lock}>"$web/.build.lock"
flock "$lock"
cd "$web"
if ! cmp -s package-lock.json node_modules/.installed-lock.json; then
  npm ci --no-audit --no-fund --loglevel=error --cache "$cache"
  cp package-lock.json node_modules/.installed-lock.json
fi
if [[ ${1:-} == check ]]; then
  # Type-checks the sources, strictly (tsconfig.json); esbuild only strips
  # the types.
  exec node_modules/.bin/tsc -p .
fi
node build.mjs
