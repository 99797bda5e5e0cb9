package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// maxDays is the most days a time.Duration holds (about 292 years).
const maxDays = int64(1<<63-1) / int64(24*time.Hour)

// parseDuration reads a Go duration ("90m", "1h30m") that may start with
// whole days: "7d", "1d12h", "90d". Go's own syntax has no day unit, and
// usage windows and retentions are counted in days.
func parseDuration(s string) (time.Duration, error) {
	i := strings.IndexByte(s, 'd') // no Go duration unit contains a d
	if i < 0 {
		return time.ParseDuration(s)
	}
	days, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil || days < 0 || days > maxDays {
		return 0, fmt.Errorf("time: invalid duration %q (want a Go duration, optionally after whole days: 7d, 1d12h)", s)
	}
	d := time.Duration(days) * 24 * time.Hour
	if rest := s[i+1:]; rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil || r < 0 {
			return 0, fmt.Errorf("time: invalid duration %q (want a Go duration, optionally after whole days: 7d, 1d12h)", s)
		}
		if d += r; d < 0 {
			return 0, fmt.Errorf("time: duration %q is too long", s)
		}
	}
	return d, nil
}

// formatDuration writes d with whole days first, as parseDuration reads it.
func formatDuration(d time.Duration) string {
	day := 24 * time.Hour
	if d < day || d < 0 {
		return d.String()
	}
	days, rest := d/day, d%day
	if rest == 0 {
		return strconv.FormatInt(int64(days), 10) + "d"
	}
	return strconv.FormatInt(int64(days), 10) + "d" + rest.String()
}

// durationValue is a pflag.Value of a duration in parseDuration's syntax.
type durationValue time.Duration

var _ pflag.Value = (*durationValue)(nil)

func (v *durationValue) String() string { return formatDuration(time.Duration(*v)) }

func (v *durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*v = durationValue(d)
	return nil
}

func (v *durationValue) Type() string { return "duration" }

// daysVar defines a duration flag that also takes days ("7d").
func daysVar(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationValue)(p), name, usage)
}
