#!/usr/bin/env bash
# Tests of the TypeScript client (clients/typescript) against a real
# `tollgate serve`, which the tests start on free ports.
#
#   scripts/test-typescript.sh
#
# Needs Go (to build tollgate), Node 18+ and npm. Installs the pinned dev
# dependencies (typescript, @types/node) of clients/typescript/package-lock.json
# into clients/typescript/node_modules with `npm ci` (again only when the
# lock file changes), packs the package with `npm pack` (its prepare script
# compiles src/ with tsc into clients/typescript/dist) into
# .cache/typescript-dist/, compiles the tests, and runs them with Node's
# built-in test runner.
#
# Then the package as a user installs it: the tarball into an empty project
# (npm install --offline: it has no dependencies), checked to be a copy with
# dist/ and no dependency, imported from an ES module and from CommonJS
# (import()); and the README examples marked
# `<!-- runs in scripts/test-typescript.sh -->` (README.md,
# clients/typescript/README.md), each type-checked there with the pinned tsc
# and run with Node against a fresh `tollgate serve --store memory:`.
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

rm -rf dist "$root/.cache/typescript-dist"
mkdir -p "$root/.cache/typescript-dist"
npm pack --loglevel=error --pack-destination "$root/.cache/typescript-dist" >&2
tarball=$(echo "$root"/.cache/typescript-dist/tollgate-rl-client-*.tgz)
[ -f "$tarball" ] || { echo "test-typescript: npm pack wrote no tollgate-rl-client-*.tgz" >&2; exit 1; }
node_modules/.bin/tsc -p tsconfig.test.json

export TOLLGATE_BIN="$root/.cache/bin/tollgate"
node --test --test-reporter=spec dist/test-build/test/*.test.js

# The tarball, installed into an empty project as a user would.
# shellcheck source=scripts/lib-clients.sh
. "$root/scripts/lib-clients.sh"
tmp=$(mktemp -d)
cleanup() {
  [ -z "${TOLLGATE_PID:-}" ] || kill "$TOLLGATE_PID" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
tsc="$PWD/node_modules/.bin/tsc"
mkdir "$tmp/app"
cd "$tmp/app"
echo '{ "name": "app", "private": true, "type": "module" }' >package.json
echo "test-typescript: installing $(basename "$tarball") into an empty project" >&2
npm install --offline --no-audit --no-fund --loglevel=error "$tarball" >&2
pkg=node_modules/@tollgate-rl/client
[ -d "$pkg" ] && [ ! -L "$pkg" ] && [ -f "$pkg/dist/index.js" ] && [ -f "$pkg/dist/index.d.ts" ] || {
  echo "test-typescript: the tarball did not install a copy with dist/index.js and index.d.ts" >&2; exit 1; }
installed=$(find node_modules -name package.json -not -path "$pkg/*" | wc -l)
[ "$installed" -eq 0 ] || { echo "test-typescript: the package brought dependencies:" >&2; ls node_modules >&2; exit 1; }
node --input-type=module -e '
import { readFileSync } from "node:fs";
import { Client, defaultUserAgent, version } from "@tollgate-rl/client";
const pkg = JSON.parse(readFileSync("node_modules/@tollgate-rl/client/package.json", "utf8"));
if (version !== pkg.version || defaultUserAgent !== `tollgate-ts-client/${pkg.version}`) throw new Error(`version ${version}, package.json ${pkg.version}`);
if (typeof Client !== "function") throw new Error("no Client");
'
echo 'import("@tollgate-rl/client").then((m) => { if (typeof m.Client !== "function") process.exit(1); });' >cjs.cjs
node cjs.cjs
cat >tsconfig.json <<'EOF2'
{ "compilerOptions": { "target": "ES2022", "lib": ["ES2022", "ESNext.Disposable", "DOM"], "types": [], "module": "NodeNext",
    "moduleResolution": "NodeNext", "strict": true, "skipLibCheck": false }, "include": ["example-*.ts"] }
EOF2
readmes=(README.md clients/typescript/README.md)
for i in "${!readmes[@]}"; do
  readme_examples "$root/${readmes[$i]}" "<!-- runs in scripts/test-typescript.sh -->" ts >"example-$i.ts"
  [ -s "example-$i.ts" ] || { echo "test-typescript: ${readmes[$i]} has no example marked to run" >&2; exit 1; }
done
echo "test-typescript: type-checking the README examples against the installed package" >&2
"$tsc" -p tsconfig.json >&2 || { echo "test-typescript: the README examples do not compile (above)" >&2; exit 1; }
for i in "${!readmes[@]}"; do
  start_tollgate "$TOLLGATE_BIN" "$tmp/serve.log"
  sed -i "s#http://127.0.0.1:8080#$TOLLGATE_URL#g" "example-$i.js"
  echo "test-typescript: ${readmes[$i]}'s example, against $TOLLGATE_URL" >&2
  if ! node "example-$i.js" >"$tmp/example.out" 2>&1; then
    echo "test-typescript: ${readmes[$i]}'s example failed:" >&2
    cat "$tmp/example.out" >&2
    exit 1
  fi
  kill "$TOLLGATE_PID" && wait "$TOLLGATE_PID" 2>/dev/null || true
  TOLLGATE_PID=
done
echo "test-typescript: the tarball installs and the README examples run" >&2
