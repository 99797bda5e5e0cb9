#!/usr/bin/env bash
# Chromium for the dashboard's browser test (server/ui), from Debian's
# package. Prints the browser's path on stdout when it is there (installed
# now or before), as scripts/dynamodb-local.sh prints its jar dir.
#
#   scripts/install-chromium.sh
#
# Chromium found on PATH (chromium, chromium-browser, google-chrome) is used
# as it is. Else, as root with apt-get, it runs
# `apt-get install -y --no-install-recommends chromium` (after
# `apt-get update` if the package is not known yet). Else, or if that fails,
# it prints nothing and says why on stderr, so that the browser test skips
# with the command to run; unless CI is set (CI=true, as CI systems set it):
# then it fails.
set -euo pipefail

in_ci() {
	case "${CI:-}" in
	"" | false | False | FALSE | 0) return 1 ;;
	*) return 0 ;;
	esac
}

find_browser() {
	local b
	for b in chromium chromium-browser google-chrome; do
		if command -v "$b" >/dev/null 2>&1; then
			command -v "$b"
			return 0
		fi
	done
	return 1
}

missing() {
	if in_ci; then
		echo "install-chromium: $1 (CI is set, so this fails)" >&2
		exit 1
	fi
	echo "install-chromium: $1; the dashboard's browser test will skip (install with: apt-get install -y chromium)" >&2
	exit 0
}

if find_browser; then
	exit 0
fi
command -v apt-get >/dev/null 2>&1 || missing "no chromium and no apt-get to install it"
[ "$(id -u)" = 0 ] || missing "no chromium, and installing it with apt-get needs root"

export DEBIAN_FRONTEND=noninteractive
apt_install() { apt-get install -y -qq --no-install-recommends chromium >&2; }
echo "install-chromium: installing Debian's chromium package" >&2
if ! apt_install; then
	apt-get update -qq >&2 || true
	apt_install || missing "apt-get install chromium failed"
fi
find_browser || missing "chromium installed but not found on PATH"
