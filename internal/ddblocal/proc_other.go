//go:build !linux

package ddblocal

import (
	"os"
	"syscall"
)

// childAttr: without Linux's parent-death signal, a server whose test
// binary is killed outlives it.
func childAttr() *syscall.SysProcAttr { return nil }

func killChild(p *os.Process) error { return p.Kill() }

// listens cannot check the socket's owner here: an answer on the port is
// taken as ours, as long as our process runs (the caller checks that).
func listens(pid, port int) (bool, error) { return true, nil }
