#!/usr/bin/env bash
# Tests of the TypeScript client (clients/typescript) against a real
# `tollgate serve`, which the tests start on free ports.
#
#   scripts/test-typescript.sh
#
# Needs Go (to build tollgate), Node 18+ and npm. Installs the pinned dev
# dependencies (typescript, @types/node) of clients/typescript/package-lock.json
# into clients/typescript/node_modules with `npm ci` (again only when the
# lock file changes), compiles with tsc into clients/typescript/dist, and
# runs the compiled tests with Node's built-in test runner.
#
# Without node or npm (or with a Node older than 18) it skips with a
# message and exits 0; with CI set (CI=true) it fails instead.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=clients/typescript

missing() {
  if [ -n "${CI:-}" ]; then
    echo "test-typescript: $1 (CI is set, so this fails)" >&2
    exit 1
  fi
  echo "test-typescript: $1; TypeScript client tests skipped" >&2
  exit 0
}

command -v node >/dev/null 2>&1 || missing "node (18+) is needed, and not found"
command -v npm >/dev/null 2>&1 || missing "npm is needed, and not found"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 18 ] || missing "Node 18+ is needed, found $(node --version)"

echo "test-typescript: building tollgate" >&2
"${GO:-go}" build -o .cache/bin/tollgate ./cmd/tollgate

cd "$dir"
stamp=node_modules/.tollgate-lock
if ! cmp -s package-lock.json "$stamp" 2>/dev/null; then
  echo "test-typescript: npm ci (typescript and @types/node, pinned in package-lock.json)" >&2
  npm ci --no-audit --no-fund --loglevel=error >&2
  cp package-lock.json "$stamp"
fi

rm -rf dist
node_modules/.bin/tsc -p tsconfig.json
node_modules/.bin/tsc -p tsconfig.test.json

TOLLGATE_BIN="$root/.cache/bin/tollgate" exec node --test --test-reporter=spec dist/test-build/test/*.test.js
