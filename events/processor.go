package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/tollgate-rl/tollgate/model"
)

// MaxEventSize bounds one event, in bytes: EventBridge's limit.
const MaxEventSize = 256 << 10

// Releaser releases a reservation by its id alone. It returns an error
// matching model.ErrLeaseNotFound when the id holds no reservation. The
// Processor passes model.WithTrigger, naming the rule and the event, for
// the release's audit event; the principal is the Releaser's to add
// (tollgate.Limiter.Release records the one given, the Go client its own
// or its API key's name).
type Releaser interface {
	Release(ctx context.Context, id string, opts ...model.WriteOption) error
}

// Outcome is what became of one event.
type Outcome int

// The outcomes of an event.
const (
	// Released: a rule matched and the reservation was released.
	Released Outcome = iota
	// NotFound: a rule matched, and the id held no reservation.
	NotFound
	// Unmatched: no rule matched.
	Unmatched
	// Malformed: the value is not an event (not JSON, too large, no
	// source) nor a wrapper of events (package doc), or a matching rule
	// found no id where it said.
	Malformed
	// Failed: the release failed (the store did not answer); the event
	// may be handed again.
	Failed
)

var outcomeNames = [...]string{"released", "not_found", "unmatched", "malformed", "failed"}

// String names the outcome as metrics and logs do.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Result is the outcome of one event, with the rule and id that decided
// it, and why for Malformed and Failed.
type Result struct {
	Outcome Outcome
	Rule    string
	ID      string
	// MessageID is the id of the SQS message the event came in ("" for an
	// event that came alone): what an SQS partial batch response names.
	MessageID string
	Err       error
}

// Stats counts events by outcome.
type Stats struct {
	Released, NotFound, Unmatched, Malformed, Failed uint64
}

// A Processor matches events against a Config and releases what they name.
// It is safe for concurrent use.
type Processor struct {
	cfg    *Config
	rel    Releaser
	log    *slog.Logger
	counts [len(outcomeNames)]atomic.Uint64
}

// NewProcessor returns a Processor of cfg (validated here) that releases
// through rel, logging malformed events and failures to log (nil:
// slog.Default()).
func NewProcessor(cfg *Config, rel Releaser, log *slog.Logger) (*Processor, error) {
	if cfg == nil || rel == nil {
		return nil, model.Invalid("processor", "nil", "a config and a releaser are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &Processor{cfg: cfg, rel: rel, log: log}, nil
}

// Stats returns the counts so far.
func (p *Processor) Stats() Stats {
	return Stats{
		Released: p.counts[Released].Load(), NotFound: p.counts[NotFound].Load(), Unmatched: p.counts[Unmatched].Load(),
		Malformed: p.counts[Malformed].Load(), Failed: p.counts[Failed].Load(),
	}
}

// Handle decides one event (its JSON), counts and logs the outcome. The
// event must be an event itself: HandleValue also takes the wrappers
// of events.
func (p *Processor) Handle(ctx context.Context, raw []byte) Result {
	return p.record(p.handle(ctx, raw))
}

// record counts and logs an outcome.
func (p *Processor) record(res Result) Result {
	p.counts[res.Outcome].Add(1)
	var attrs []any
	if res.MessageID != "" {
		attrs = append(attrs, "message", res.MessageID)
	}
	switch res.Outcome {
	case Malformed:
		p.log.Warn("events: malformed event skipped", append(attrs, "rule", res.Rule, "err", res.Err)...)
	case Failed:
		p.log.Error("events: release failed", append(attrs, "rule", res.Rule, "id", res.ID, "err", res.Err)...)
	}
	return res
}

func (p *Processor) handle(ctx context.Context, raw []byte) Result {
	if len(raw) > MaxEventSize {
		return Result{Outcome: Malformed, Err: fmt.Errorf("event of %d bytes, more than %d", len(raw), MaxEventSize)}
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		return Result{Outcome: Malformed, Err: fmt.Errorf("not a JSON object: %w", err)}
	}
	// Every EventBridge event has a source, and every rule matches on
	// it: an object without one is something else.
	if _, ok := ev["source"].(string); !ok {
		return Result{Outcome: Malformed, Err: errors.New("not an EventBridge event: no source")}
	}
	for i := range p.cfg.Rules {
		r := &p.cfg.Rules[i]
		if !r.matches(ev) {
			continue
		}
		id, ok := lookup(ev, r.ID).(string)
		if !ok || id == "" {
			return Result{Outcome: Malformed, Rule: r.Name, Err: fmt.Errorf("rule %s: no string at %s", r.Name, r.ID)}
		}
		switch err := p.rel.Release(ctx, id, model.WithTrigger(triggerOf(r, ev))); {
		case err == nil:
			return Result{Outcome: Released, Rule: r.Name, ID: id}
		case errors.Is(err, model.ErrLeaseNotFound):
			return Result{Outcome: NotFound, Rule: r.Name, ID: id}
		case errors.Is(err, model.ErrInvalid):
			return Result{Outcome: Malformed, Rule: r.Name, ID: id, Err: err}
		default:
			return Result{Outcome: Failed, Rule: r.Name, ID: id, Err: err}
		}
	}
	return Result{Outcome: Unmatched}
}

// triggerOf names the event and the rule that matched it, for the
// release's audit event. A field past its bound (model.MaxTriggerFieldLen:
// an event not from EventBridge, a long rule name) is cut there, so that
// the audit never stops a release.
func triggerOf(r *Rule, ev map[string]any) model.EventTrigger {
	str := func(v any) string {
		s, _ := v.(string)
		return clip(s)
	}
	return model.EventTrigger{Rule: clip(r.Name), Source: str(ev["source"]), DetailType: str(ev["detail-type"]), EventID: str(ev["id"])}
}

// clip cuts s to at most model.MaxTriggerFieldLen bytes, on a character
// boundary.
func clip(s string) string {
	if len(s) <= model.MaxTriggerFieldLen {
		return s
	}
	n := model.MaxTriggerFieldLen
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// matches reports whether the event is the rule's: its source, detail-type
// and every When path.
func (r *Rule) matches(ev map[string]any) bool {
	if ev["source"] != r.Source || r.DetailType != "" && ev["detail-type"] != r.DetailType {
		return false
	}
	for path, vals := range r.When {
		v, ok := text(lookup(ev, path))
		if !ok || !slices.Contains(vals, v) {
			return false
		}
	}
	return true
}

// lookup follows a dotted path into a decoded JSON value; nil if it leads
// nowhere.
func lookup(v any, path string) any {
	for _, seg := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// text is a scalar's text for comparing with a rule's values.
func text(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case float64, bool:
		b, _ := json.Marshal(x)
		return string(b), true
	}
	return "", false
}
