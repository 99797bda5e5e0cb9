package redislocal

import (
	"os"
	"syscall"
)

// childAttr makes the server die with the process that started it (SIGKILL
// when that thread ends: see tryNode), in its own process group so that
// stop ends it whole.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killChild kills the server's process group.
func killChild(p *os.Process) error {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil {
		return p.Kill()
	}
	return nil
}
