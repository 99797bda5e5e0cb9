#!/usr/bin/env bash
# The pinned helm, built from source with the go command (there is no Debian
# package and no download beyond the Go module proxy here).
#
#   scripts/helm.sh install   builds helm $HELM_VERSION into .cache/bin/helm-$HELM_VERSION
#                             when it is not there, and prints its path.
#
# The build runs in a temporary directory so that it does not touch this
# module's go.mod; the first one takes about two minutes on two cores.
#
# Environment: GO (default go), HELM_VERSION (default v3.22.0).
set -euo pipefail

cd "$(dirname "$0")/.."

GO="${GO:-go}"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
bin="$PWD/.cache/bin/helm-$HELM_VERSION"

case "${1:-}" in
install)
	if [ ! -x "$bin" ]; then
		mkdir -p .cache/bin
		tmp=$(mktemp -d)
		trap 'rm -rf "$tmp"' EXIT
		(cd "$tmp" && GOFLAGS=-mod=mod GOBIN="$tmp/bin" "$GO" install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION") >&2
		mv "$tmp/bin/helm" "$bin"
	fi
	echo "$bin"
	;;
*)
	echo "usage: scripts/helm.sh install" >&2
	exit 2
	;;
esac
