package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/tollgate-rl/tollgate"
)

// progress shows how far a long operation has come. On a terminal it
// draws a bar when the total is known (limits apply) and a spinner with a
// count when it is not (namespace purge); either way it ends with one plain
// line, which is all it prints anywhere else, so logs and pipes stay clean.
type progress struct {
	w     io.Writer
	label string
	total int                      // -1 when unknown
	bar   *progressbar.ProgressBar // nil unless w is a terminal

	mu sync.Mutex
	n  int
}

// newProgress starts the progress of label with total steps (-1 if
// unknown), drawn only if w is a terminal.
func newProgress(w io.Writer, label string, total int) *progress {
	return newProgressOn(w, label, total, isTerminal(w))
}

// newProgressOn is newProgress with the terminal test done by the caller.
func newProgressOn(w io.Writer, label string, total int, tty bool) *progress {
	p := &progress{w: w, label: label, total: total}
	if tty {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSpinnerType(14),
			progressbar.OptionSetPredictTime(total > 0),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

// isTerminal reports whether w is a terminal (a progress bar there is
// read by a person).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// set records the count so far.
func (p *progress) set(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n = n
	if p.bar != nil {
		_ = p.bar.Set(n)
	}
}

// add counts one more step.
func (p *progress) add() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if p.bar != nil {
		_ = p.bar.Add(1)
	}
}

// done clears the bar and prints the final count.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Finish()
		_ = p.bar.Exit()
	}
	if p.total >= 0 {
		fmt.Fprintf(p.w, "%s: %d of %d done\n", p.label, p.n, p.total)
		return
	}
	fmt.Fprintf(p.w, "%s: %d done\n", p.label, p.n)
}

func asRateLimited(err error) (*tollgate.RateLimitExceeded, bool) {
	var rl *tollgate.RateLimitExceeded
	ok := errors.As(err, &rl)
	return rl, ok
}
