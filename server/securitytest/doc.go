// Package securitytest holds the security probes of docs/security.md: what
// a hostile tenant tries against tollgate serve, each a test that runs
// against every backend (memory, embedded, DynamoDB Local). It has no code
// of its own beyond its tests.
package securitytest
