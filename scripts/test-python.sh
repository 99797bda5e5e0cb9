#!/usr/bin/env bash
# Tests of the Python client (clients/python) against a real `tollgate serve`.
#
# Builds the server into .cache/bin/tollgate, then runs the client's unittest
# suite, which starts `tollgate serve --store memory:` on free loopback ports
# (TOLLGATE_BIN names the binary) and stops it at the end. Needs Go and
# Python 3.9+; installs nothing (the client uses only the standard library).
#
# Then the package: builds the wheel with pip, offline (--no-index: the
# build backend is the source tree's own) into .cache/python-dist/, installs
# it into a fresh virtual environment (venv --without-pip, filled by this
# pip's --python, pip 22.3+), checks there that the installed metadata's
# version is tollgate.__version__, and runs the README examples marked
# `<!-- runs in scripts/test-python.sh -->` (README.md, clients/python/README.md)
# with that environment's python against a fresh server each. Without pip
# (Debian: apt-get install python3-pip) or a pip older than 22.3, that part
# is skipped with a message, unless CI is set.
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
"$PYTHON" -m unittest discover -s clients/python/tests -t clients/python/tests -v

# The package, built and installed as a user would, and the README examples.
# shellcheck source=scripts/lib-clients.sh
. scripts/lib-clients.sh
"$PYTHON" -m pip --version >/dev/null 2>&1 || missing "no pip ($PYTHON -m pip) to build the package with"
"$PYTHON" -c 'import sys; from pip import __version__ as v; sys.exit(tuple(map(int, v.split(".")[:2])) < (22, 3))' ||
	missing "pip $("$PYTHON" -c 'import pip; print(pip.__version__)') is older than the 22.3 whose --python installs into a venv"
tmp=$(mktemp -d)
cleanup() {
	[ -z "${TOLLGATE_PID:-}" ] || kill "$TOLLGATE_PID" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
rm -rf .cache/python-dist
"$PYTHON" -m pip wheel --quiet --no-index --no-deps -w .cache/python-dist ./clients/python
wheel=$(echo .cache/python-dist/tollgate_client-*-py3-none-any.whl)
[ -f "$wheel" ] || { echo "test-python: pip wrote no wheel into .cache/python-dist" >&2; exit 1; }
echo "test-python: built $wheel; installing it into a fresh venv" >&2
"$PYTHON" -m venv --without-pip "$tmp/venv"
"$PYTHON" -m pip --python "$tmp/venv/bin/python" install --quiet --no-index --no-deps "$wheel"
# -I: neither PYTHONPATH nor the working directory, so tollgate is the venv's.
(cd "$tmp" && "$tmp/venv/bin/python" -I -c '
import importlib.metadata, sys, tollgate
assert tollgate.__file__.startswith(sys.prefix), tollgate.__file__
meta = importlib.metadata.version("tollgate-client")
assert meta == tollgate.__version__, (meta, tollgate.__version__)
assert tollgate.DEFAULT_USER_AGENT == "tollgate-python-client/" + meta, tollgate.DEFAULT_USER_AGENT
print("test-python: the installed tollgate-client", meta, "imports from", tollgate.__file__, file=sys.stderr)
')
for readme in README.md clients/python/README.md; do
	readme_examples "$readme" "<!-- runs in scripts/test-python.sh -->" python >"$tmp/example.py"
	[ -s "$tmp/example.py" ] || { echo "test-python: $readme has no example marked to run" >&2; exit 1; }
	start_tollgate "$TOLLGATE_BIN" "$tmp/serve.log"
	sed -i "s#http://127.0.0.1:8080#$TOLLGATE_URL#g" "$tmp/example.py"
	echo "test-python: $readme's examples, against $TOLLGATE_URL" >&2
	if ! (cd "$tmp" && "$tmp/venv/bin/python" -I example.py >"$tmp/example.out" 2>&1); then
		echo "test-python: $readme's examples failed:" >&2
		cat "$tmp/example.out" >&2
		exit 1
	fi
	kill "$TOLLGATE_PID" && wait "$TOLLGATE_PID" 2>/dev/null || true
	TOLLGATE_PID=
done
echo "test-python: the wheel installs and the README examples run" >&2
