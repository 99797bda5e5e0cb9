// Package check validates the Tollgate Helm chart's rendered manifests
// (deploy/helm/tollgate) without a cluster: every object is decoded
// strictly into the typed structs of a pinned k8s.io/api (and the
// prometheus-operator's ServiceMonitor), so an unknown or misspelled field
// is an error, and then checked for what the types cannot say: probes on
// /readyz and /healthz, ports that agree between the containers, the
// Services and the probes, the non-root user of the image, selectors that
// match the pods, the HPA's target, IRSA for DynamoDB, a single-replica
// StatefulSet with a volume for the embedded store, and the keys Secret
// mounted where --keys points.
//
// It is a module of its own so that the main module's go.mod does not
// carry Kubernetes' dependencies; scripts/test-helm.sh runs its tests.
package check
