package child_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/internal/child"
)

// A child's output is kept, Exited closes when it ends by itself, and
// Kill ends one that would run on, returning once it has exited.
func TestStartOutputKill(t *testing.T) {
	p, err := child.Start(exec.Command("sh", "-c", "echo hello; echo oops >&2"))
	if err != nil {
		t.Skipf("no sh: %v", err)
	}
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("sh did not exit")
	}
	if out := p.Output(); !strings.Contains(out, "hello") || !strings.Contains(out, "oops") {
		t.Errorf("output %q, want both streams", out)
	}
	p.Kill() // already gone: returns at once

	long, err := child.Start(exec.Command("sleep", "60"))
	if err != nil {
		t.Skipf("no sleep: %v", err)
	}
	long.Kill()
	select {
	case <-long.Exited():
	default:
		t.Error("Kill returned before the process exited")
	}
}
