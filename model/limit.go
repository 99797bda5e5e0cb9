package model

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate/calendar"
)

// Kind distinguishes limits that refill over time from limits on work in
// flight and on resources held by id.
type Kind uint8

const (
	// Rate is a token bucket: consumption is spent and refilled over time.
	Rate Kind = iota
	// Concurrency caps work in flight: consumption is returned when the lease
	// ends (Commit or Rollback), and nothing refills.
	Concurrency
	// Reserved caps resources held by a unique id (an EMR cluster, a GPU
	// job): a concurrency limit whose tokens are taken one per reservation
	// id and given back when that id is released. Its values are stored,
	// so they must not change: a stored Kind is its number.
	Reserved
)

var kindNames = [...]string{Rate: "rate", Concurrency: "concurrency", Reserved: "reserved"}

// String returns "rate", "concurrency" or "reserved" (ParseKind reads them
// back), or "kind(N)" for a value that is none of them.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// ParseKind returns the kind String names; an unknown name is reported
// with ok false (and Rate), so that a reader of an older writer's text
// can choose what to do.
func ParseKind(s string) (k Kind, ok bool) {
	for i, name := range kindNames {
		if name == s {
			return Kind(i), true
		}
	}
	return Rate, false
}

// holds reports whether the kind's tokens are held and given back rather
// than refilled: concurrency and reserved limits.
func (k Kind) holds() bool { return k == Concurrency || k == Reserved }

// Bounds that keep a valid limit inside the bucket arithmetic's range
// (package bucket: balances in millitokens up to 2^62-1, periods up to 2^45
// ms); model states them itself so that code speaking the API need not
// compile the arithmetic. A test holds them equal to bucket's.
const (
	// MaxTokens is the largest capacity, rate or amount, in whole tokens.
	MaxTokens = (1<<62 - 1) / 1000
	// MaxPeriodMillis is the longest refill period in milliseconds (about
	// 1,100 years).
	MaxPeriodMillis = 1 << 45
)

// A Limit is one named token bucket (or concurrency cap) applied to an entity
// and resource. Amounts are whole tokens; the bucket keeps millitokens so that
// slow rates refill exactly.
type Limit struct {
	// Name identifies the limit within a request, e.g. "rpm" or "tpm".
	Name string
	// Kind is Rate (the zero value), Concurrency or Reserved.
	Kind Kind
	// Capacity is the most tokens the bucket holds: the burst.
	Capacity int64
	// RefillAmount tokens are credited every RefillPeriod. Zero for
	// concurrency and reserved limits.
	RefillAmount int64
	// RefillPeriod is a positive whole number of milliseconds. Zero for
	// concurrency and reserved limits, and for calendar quotas.
	RefillPeriod time.Duration
	// Window, if not zero, makes the limit a calendar quota: a fixed
	// window of a time zone's calendar (month@UTC, day@Europe/Berlin),
	// refilled by RefillAmount (its capacity) at each of its boundaries,
	// debt carried over. See CalendarQuota.
	Window calendar.Window
}

// CalendarQuota returns a quota of n tokens per window of a time zone's
// calendar (e.g. calendar.Window{Unit: calendar.Month, Zone: "UTC"}): it
// refills to n at each boundary of the window, DST-correct, and what a
// window ends in debt is owed by the next. Its text form is
// "name:N/month@UTC".
func CalendarQuota(name string, n int64, w calendar.Window) Limit {
	return Limit{Name: name, Capacity: n, RefillAmount: n, Window: w}
}

// RateLimit returns a limit of amount tokens per period with capacity amount.
func RateLimit(name string, amount int64, period time.Duration) Limit {
	return Limit{Name: name, Capacity: amount, RefillAmount: amount, RefillPeriod: period}
}

// PerSecond returns a limit of n tokens per second.
func PerSecond(name string, n int64) Limit { return RateLimit(name, n, time.Second) }

// PerMinute returns a limit of n tokens per minute.
func PerMinute(name string, n int64) Limit { return RateLimit(name, n, time.Minute) }

// PerHour returns a limit of n tokens per hour.
func PerHour(name string, n int64) Limit { return RateLimit(name, n, time.Hour) }

// PerDay returns a limit of n tokens per day.
func PerDay(name string, n int64) Limit { return RateLimit(name, n, 24*time.Hour) }

// ConcurrencyLimit returns a limit of at most n operations (or n units) in flight.
func ConcurrencyLimit(name string, n int64) Limit {
	return Limit{Name: name, Kind: Concurrency, Capacity: n}
}

// ReservedLimit returns a limit of at most n resources reserved at once, each
// by its own id (see tollgate.WithReservation). Its text form is
// "name:N/reserved".
func ReservedLimit(name string, n int64) Limit {
	return Limit{Name: name, Kind: Reserved, Capacity: n}
}

// WithBurst returns a copy of l whose capacity is burst; the refill rate is
// unchanged. A burst below the rate is allowed (it smooths traffic).
func (l Limit) WithBurst(burst int64) Limit {
	l.Capacity = burst
	return l
}

// Validate reports the first problem with l as a *ValidationError.
func (l Limit) Validate() error {
	field := "limit"
	if l.Name != "" {
		field = "limit." + truncate(l.Name)
	}
	if err := ValidateLimitName(l.Name); err != nil {
		return err
	}
	switch {
	case l.Kind != Rate && !l.Kind.holds():
		return invalid(field+".kind", strconv.Itoa(int(l.Kind)), "unknown kind")
	case l.Capacity <= 0:
		return invalid(field+".capacity", strconv.FormatInt(l.Capacity, 10), "must be positive")
	case l.Capacity > MaxTokens:
		return invalid(field+".capacity", strconv.FormatInt(l.Capacity, 10), "exceeds "+strconv.FormatInt(MaxTokens, 10))
	}
	if l.Kind.holds() {
		if l.RefillAmount != 0 || l.RefillPeriod != 0 || !l.Window.IsZero() {
			return invalid(field, l.String(), "a "+l.Kind.String()+" limit has no refill")
		}
		return nil
	}
	if !l.Window.IsZero() {
		return l.validateQuota(field)
	}
	switch {
	case l.RefillAmount <= 0:
		return invalid(field+".refill_amount", strconv.FormatInt(l.RefillAmount, 10), "must be positive")
	case l.RefillAmount > MaxTokens:
		return invalid(field+".refill_amount", strconv.FormatInt(l.RefillAmount, 10), "exceeds "+strconv.FormatInt(MaxTokens, 10))
	case l.RefillPeriod < time.Millisecond:
		return invalid(field+".refill_period", l.RefillPeriod.String(), "must be at least 1ms")
	case l.RefillPeriod%time.Millisecond != 0:
		return invalid(field+".refill_period", l.RefillPeriod.String(), "must be a whole number of milliseconds")
	case l.RefillPeriod.Milliseconds() > MaxPeriodMillis:
		return invalid(field+".refill_period", l.RefillPeriod.String(), "is too long")
	}
	return nil
}

// validateQuota validates a calendar quota: a known window, its refill
// its capacity, no period.
func (l Limit) validateQuota(field string) error {
	switch err := l.Window.Validate(); {
	case errors.Is(err, calendar.ErrUnknownZone):
		return invalid(field+".window", l.Window.String(), fmt.Sprintf("unknown time zone %q", truncate(l.Window.Zone)))
	case err != nil:
		return invalid(field+".window", l.Window.String(), err.Error())
	case l.RefillAmount != l.Capacity:
		return invalid(field+".refill_amount", strconv.FormatInt(l.RefillAmount, 10), "a calendar quota refills to its capacity")
	case l.RefillPeriod != 0:
		return invalid(field+".refill_period", l.RefillPeriod.String(), "a calendar quota has its window, not a period")
	}
	return nil
}

// String formats l in the text syntax that ParseLimit reads, e.g.
// "tpm:10000/min:15000", "inflight:10/concurrent" or "gpus:4/reserved".
func (l Limit) String() string {
	var b strings.Builder
	b.WriteString(l.Name)
	b.WriteByte(':')
	if l.Kind.holds() {
		b.WriteString(strconv.FormatInt(l.Capacity, 10))
		b.WriteString(holdUnits[l.Kind])
		return b.String()
	}
	b.WriteString(strconv.FormatInt(l.RefillAmount, 10))
	b.WriteByte('/')
	if !l.Window.IsZero() {
		b.WriteString(l.Window.String())
		return b.String()
	}
	b.WriteString(formatPeriod(l.RefillPeriod))
	if l.Capacity != l.RefillAmount {
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(l.Capacity, 10))
	}
	return b.String()
}

// holdUnits are the text forms' "units" of the kinds that hold tokens.
var holdUnits = map[Kind]string{Concurrency: "/concurrent", Reserved: "/reserved"}

var units = []struct {
	name string
	d    time.Duration
}{{"day", 24 * time.Hour}, {"hour", time.Hour}, {"min", time.Minute}, {"sec", time.Second}, {"ms", time.Millisecond}}

// formatPeriod writes the largest unit that divides d: "min", "5min", "250ms".
func formatPeriod(d time.Duration) string {
	for _, u := range units {
		if d >= u.d && d%u.d == 0 {
			if n := d / u.d; n != 1 {
				return strconv.FormatInt(int64(n), 10) + u.name
			}
			return u.name
		}
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// ParseLimit reads the text syntax
//
//	name:rate[/[N]unit][:burst]    unit is ms, sec, min, hour or day; default /min
//	name:N/unit@zone               a calendar quota: unit is hour, day, week or month of an IANA time zone
//	name:N/concurrent              at most N in flight
//	name:N/reserved                at most N resources reserved by id
//
// for example "rpm:100", "tpm:10000:15000", "rps:50/sec", "rpm:100/5min",
// "tph:100000/hour:150000", "tok:1000000/month@UTC", "d:3/day@Europe/Berlin",
// "inflight:10/concurrent" or "clusters:3/reserved". Errors are
// *ValidationError values that name the part of the text that is wrong.
func ParseLimit(s string) (Limit, error) {
	name, rest, ok := strings.Cut(s, ":")
	if !ok {
		return Limit{}, invalid("limit", s, `missing ":" after the name (want name:rate[/period][:burst])`)
	}
	if err := ValidateLimitName(name); err != nil {
		return Limit{}, err
	}
	rateAndPeriod, burstText, hasBurst := strings.Cut(rest, ":")
	rateText, periodText, hasPeriod := strings.Cut(rateAndPeriod, "/")
	rate, err := parseCount(s, "rate", rateText)
	if err != nil {
		return Limit{}, err
	}
	if hasPeriod && (periodText == "concurrent" || periodText == "reserved") {
		l := ConcurrencyLimit(name, rate)
		if periodText == "reserved" {
			l = ReservedLimit(name, rate)
		}
		if hasBurst {
			return Limit{}, invalid("limit", s, "a "+l.Kind.String()+" limit takes no burst")
		}
		return l, l.Validate()
	}
	if hasPeriod && strings.Contains(periodText, "@") {
		return parseQuota(s, name, rate, periodText, hasBurst)
	}
	period := time.Minute
	if hasPeriod {
		if period, err = parsePeriod(s, periodText); err != nil {
			return Limit{}, err
		}
	}
	l := RateLimit(name, rate, period)
	if hasBurst {
		if l.Capacity, err = parseCount(s, "burst", burstText); err != nil {
			return Limit{}, err
		}
	}
	return l, l.Validate()
}

// parseQuota reads the window of a calendar quota, "unit@zone".
func parseQuota(input, name string, n int64, text string, hasBurst bool) (Limit, error) {
	if hasBurst {
		return Limit{}, invalid("limit", input, "a calendar quota takes no burst (it refills to its amount)")
	}
	unit, zone, _ := strings.Cut(text, "@")
	u, ok := calendar.ParseUnit(unit)
	if !ok {
		return Limit{}, invalid("limit", input, fmt.Sprintf("unknown calendar unit %q (want hour, day, week or month)", truncate(unit)))
	}
	l := CalendarQuota(name, n, calendar.Window{Unit: u, Zone: zone})
	if err := l.Window.Validate(); err != nil {
		return Limit{}, invalid("limit."+truncate(name)+".window", input, fmt.Sprintf("unknown time zone %q", truncate(zone)))
	}
	return l, l.Validate()
}

// ParseLimits parses each string with ParseLimit and rejects duplicate names.
func ParseLimits(texts []string) ([]Limit, error) {
	limits := make([]Limit, 0, len(texts))
	for _, t := range texts {
		l, err := ParseLimit(t)
		if err != nil {
			return nil, err
		}
		limits = append(limits, l)
	}
	return limits, ValidateLimits(limits)
}

func parseCount(input, part, text string) (int64, error) {
	if text == "" {
		return 0, invalid("limit", input, "missing "+part)
	}
	for i := 0; i < len(text); i++ {
		if text[i] < '0' || text[i] > '9' {
			return 0, invalid("limit", input, fmt.Sprintf("%s %q is not a whole number", part, truncate(text)))
		}
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n > MaxTokens {
		return 0, invalid("limit", input, fmt.Sprintf("%s %q exceeds %d", part, truncate(text), MaxTokens))
	}
	if n == 0 {
		return 0, invalid("limit", input, part+" must be positive")
	}
	return n, nil
}

func parsePeriod(input, text string) (time.Duration, error) {
	i := 0
	for i < len(text) && text[i] >= '0' && text[i] <= '9' {
		i++
	}
	mult := int64(1)
	if i > 0 {
		n, err := strconv.ParseInt(text[:i], 10, 64)
		if err != nil || n == 0 || n > MaxPeriodMillis {
			return 0, invalid("limit", input, fmt.Sprintf("period multiplier %q must be between 1 and %d", truncate(text[:i]), MaxPeriodMillis))
		}
		mult = n
	}
	unit := text[i:]
	for _, u := range units {
		if u.name == unit {
			// A time.Duration holds about 292 years; longer periods are
			// rejected here rather than wrapped.
			if mult > int64(math.MaxInt64/u.d) {
				return 0, invalid("limit", input, fmt.Sprintf("period %q is too long", truncate(text)))
			}
			return time.Duration(mult) * u.d, nil
		}
	}
	if _, ok := calendar.ParseUnit(unit); ok {
		return 0, invalid("limit", input, fmt.Sprintf("a calendar %s needs its time zone: /%s@UTC, /%s@Europe/Berlin", unit, unit, unit))
	}
	return 0, invalid("limit", input, fmt.Sprintf("unknown period unit %q (want sec, min, hour, day, ms, concurrent or reserved)", truncate(unit)))
}

// ValidateLimits validates each limit and rejects duplicate names.
func ValidateLimits(limits []Limit) error {
	for i, l := range limits {
		if err := l.Validate(); err != nil {
			return err
		}
		for _, prev := range limits[:i] {
			if prev.Name == l.Name {
				return invalid("limits", l.Name, "duplicate limit name")
			}
		}
	}
	return nil
}
