//go:build !linux

package redislocal

import (
	"os"
	"syscall"
)

// childAttr: without Linux's parent-death signal, a server whose test
// binary is killed outlives it.
func childAttr() *syscall.SysProcAttr { return nil }

func killChild(p *os.Process) error { return p.Kill() }
