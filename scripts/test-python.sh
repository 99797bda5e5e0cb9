#!/usr/bin/env bash
# Tests of the Python client (clients/python) against a real `tollgate serve`.
#
# Builds the server into .cache/bin/tollgate, then runs the client's unittest
# suite, which starts `tollgate serve --store memory:` on free loopback ports
# (TOLLGATE_BIN names the binary) and stops it at the end. Needs Go and
# Python 3.9+; installs nothing (the client uses only the standard library).
#
# Without python3 the tests are skipped with a message, unless CI is set
# (CI=true, as CI systems set it): then a missing or too old python3 fails.
#
# Environment: PYTHON (default python3), GO (default go).
set -euo pipefail

cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
GO="${GO:-go}"

in_ci() {
	case "${CI:-}" in
	"" | false | False | FALSE | 0) return 1 ;;
	*) return 0 ;;
	esac
}

missing() {
	if in_ci; then
		echo "test-python: $1 (CI is set, so this fails)" >&2
		exit 1
	fi
	echo "test-python: $1; skipping the Python client's tests" >&2
	exit 0
}

command -v "$PYTHON" >/dev/null 2>&1 || missing "$PYTHON not found"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 9))' ||
	missing "$("$PYTHON" --version 2>&1) is older than the 3.9 the client needs"

mkdir -p .cache/bin
"$GO" build -o .cache/bin/tollgate ./cmd/tollgate

export TOLLGATE_BIN="$PWD/.cache/bin/tollgate"
export PYTHONDONTWRITEBYTECODE=1
exec "$PYTHON" -m unittest discover -s clients/python/tests -t clients/python/tests -v
