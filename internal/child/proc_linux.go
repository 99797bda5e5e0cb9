package child

import (
	"os"
	"syscall"
)

// attr puts the child in a process group of its own and has the kernel
// kill it when the thread that started it ends (see Start).
func attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// kill kills the child's process group.
func kill(p *os.Process) error {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil {
		return p.Kill()
	}
	return nil
}
