package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/tollgate-rl/tollgate"
)

// progress reports the count of a long operation on a terminal, rewriting
// one line at most five times a second. On anything but a terminal it
// prints only the final count.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	tty   bool
	n     int
	last  time.Time
}

func newProgress(w io.Writer, label string) *progress {
	p := &progress{w: w, label: label}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// set records the count so far.
func (p *progress) set(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n = n
	if p.tty && time.Since(p.last) > 200*time.Millisecond {
		p.last = time.Now()
		fmt.Fprintf(p.w, "\r%s: %d", p.label, n)
	}
}

// add counts one more.
func (p *progress) add() {
	p.mu.Lock()
	n := p.n + 1
	p.mu.Unlock()
	p.set(n)
}

// done prints the final count.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r")
	}
	fmt.Fprintf(p.w, "%s: %d done\n", p.label, p.n)
}

func asRateLimited(err error) (*tollgate.RateLimitExceeded, bool) {
	var rl *tollgate.RateLimitExceeded
	ok := errors.As(err, &rl)
	return rl, ok
}
