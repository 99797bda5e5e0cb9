// Package envoybench holds, in its tests, the comparisons of Tollgate with
// its peers, each run as a process: its Envoy rate-limit service against
// envoyproxy/ratelimit on one redis-server (make bench-envoy-redis), and
// its gRPC and HTTP services against gubernator (make bench-peers); see
// BENCHMARKS.md. It has no code of its own: the load comes from the
// benchmarks.
package envoybench
