//go:build !linux

package child

import (
	"os"
	"syscall"
)

// attr: without Linux's parent-death signal, a child whose test binary is
// killed outlives it.
func attr() *syscall.SysProcAttr { return nil }

func kill(p *os.Process) error { return p.Kill() }
