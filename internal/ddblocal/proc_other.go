//go:build !linux

package ddblocal

// listens cannot check the socket's owner here: an answer on the port is
// taken as ours, as long as our process runs (the caller checks that).
func listens(pid, port int) (bool, error) { return true, nil }
