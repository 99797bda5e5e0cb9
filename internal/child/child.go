// Package child runs the server processes that tests start (DynamoDB
// Local, redis-server): each runs in a process group of its own, so that
// Kill ends it whole, dies with the process that started it (on Linux,
// even if that process is killed or panics), and has its output kept for
// the message of a failure.
package child

import (
	"bytes"
	"os/exec"
	"runtime"
	"sync"
)

// A Process is a child process started by Start.
type Process struct {
	cmd    *exec.Cmd
	out    syncBuffer
	exited chan struct{}
}

// Start starts cmd, its standard output and error kept (Output).
func Start(cmd *exec.Cmd) (*Process, error) {
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	cmd.SysProcAttr = attr()
	started := make(chan error, 1)
	go func() {
		// The parent-death signal (Linux) is tied to the thread that
		// started the child: keep that thread alive, and the goroutine on
		// it, for as long as the child runs.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Output is what the process has written so far.
func (p *Process) Output() string { return p.out.String() }

// Kill ends the process and its group, and returns once it has exited.
func (p *Process) Kill() {
	select {
	case <-p.exited:
	default:
		// A kill error cannot leave the process running past the wait
		// below (which would then never return): it only means it had
		// already gone.
		_ = kill(p.cmd.Process)
		<-p.exited
	}
}

// syncBuffer is a bytes.Buffer safe for the process's output copier and
// a concurrent reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
