#!/usr/bin/env bash
# Tests of the Helm chart (deploy/helm/tollgate) without a cluster.
#
# Installs the pinned helm (scripts/helm.sh), then runs the tests of the
# checker module deploy/helm/check (a Go module of its own, so that the
# main module does not depend on Kubernetes' API types): they render the
# chart with each values file of deploy/helm/check/testdata (DynamoDB with
# IRSA, Redis, embedded; HPA, PDB and ServiceMonitor on and off), decode
# every object strictly into the pinned k8s.io/api types, check what the
# types cannot say, run helm lint --strict, and check that mutated renders
# and bad values fail, and run every container's command line through the
# tollgate CLI (built into .cache/bin/tollgate) to check it parses.
#
# Environment: GO (default go), HELM_VERSION (see scripts/helm.sh).
set -euo pipefail

cd "$(dirname "$0")/.."

GO="${GO:-go}"
HELM="$(GO="$GO" scripts/helm.sh install)"
export HELM
mkdir -p .cache/bin
"$GO" build -o .cache/bin/tollgate ./cmd/tollgate
export TOLLGATE_BIN="$PWD/.cache/bin/tollgate"
cd deploy/helm/check
"$GO" vet ./...
exec "$GO" test -count=1 ./...
