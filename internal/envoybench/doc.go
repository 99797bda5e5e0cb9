// Package envoybench holds, in its tests, the comparison of Tollgate's
// Envoy rate-limit service on Redis with envoyproxy/ratelimit on the same
// redis-server (make bench-envoy-redis; BENCHMARKS.md). It has no code of
// its own: the two services run as processes, the load comes from the
// benchmark.
package envoybench
