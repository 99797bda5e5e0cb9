// Package events releases reservations when infrastructure says the thing
// reserved is gone: an EMR cluster terminated, a batch job finished, a
// sandbox deleted.
//
// A Processor reads events in EventBridge's JSON shape (source,
// detail-type, detail), matches each against rules, and releases the
// reservation whose id a matching rule finds in the event:
//
//	rules:
//	  - name: emr-terminated
//	    source: aws.emr
//	    detail_type: EMR Cluster State Change
//	    id: detail.clusterId
//	    when:
//	      detail.state: [TERMINATED, TERMINATED_WITH_ERRORS]
//
// Events come alone or wrapped: in a JSON array; in an SQS message whose
// body is the event (an EventBridge rule whose target is a queue), as
// Lambda hands it ({"messageId": ..., "body": "..."}) or as SQS's
// ReceiveMessage returns it ({"MessageId": ..., "Body": "..."}); in a
// batch of such messages, as Lambda hands it to a function ({"Records":
// [...]}) or as ReceiveMessage returns it ({"Messages": [...]}).
// Processor.Run reads a stream of such values (one per line, several on a
// line, or pretty-printed over many lines), HandleValue takes one, and
// Handle one event.
//
// An event no rule matches is counted and ignored; a malformed value (not
// JSON, neither an event, which has a source, nor a wrapper of events, or
// an event whose matching rule finds no id) is counted and reported, and
// never stops the stream; a release of an id that holds no reservation is
// counted as not found (events repeat, and a reservation may have been
// released by hand), not as an error.
package events

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/tollgate-rl/tollgate/model"
)

// MaxConfigSize bounds a rules file, in bytes.
const MaxConfigSize = 1 << 20

// Config is a set of rules, tried in order; the first that matches an event
// decides it.
type Config struct {
	Rules []Rule `yaml:"rules"`
}

// Rule matches events and names the field that holds the reservation id.
type Rule struct {
	// Name labels the rule in counts and logs (default "rules[i]").
	Name string `yaml:"name,omitempty"`
	// Source is the event's source, e.g. "aws.emr". Required.
	Source string `yaml:"source"`
	// DetailType, if set, is the event's detail-type, e.g. "EMR Cluster
	// State Change".
	DetailType string `yaml:"detail_type,omitempty"`
	// ID is the path of the reservation id in the event: keys joined by
	// dots, from the event's top level ("detail.clusterId"); a number
	// picks an element of an array ("resources.0"). Required.
	ID string `yaml:"id"`
	// When lists, per path, the values an event must hold there for the
	// rule to match (any one of them); strings compare as they are,
	// numbers and booleans as their JSON text.
	When map[string][]string `yaml:"when,omitempty"`
}

// ConfigError reports an invalid rules file; Field locates the problem, e.g.
// "rules[1].id".
type ConfigError struct {
	Field string
	Err   error
}

// Error names the field and the problem.
func (e *ConfigError) Error() string {
	if e.Field == "" {
		return "events config: " + e.Err.Error()
	}
	return "events config: " + e.Field + ": " + e.Err.Error()
}

// Unwrap returns the problem.
func (e *ConfigError) Unwrap() error { return e.Err }

// Is makes a ConfigError match model.ErrInvalid.
func (e *ConfigError) Is(target error) bool { return target == model.ErrInvalid }

// LoadConfig reads and validates a rules file (YAML, or JSON, which is
// YAML) of at most MaxConfigSize bytes.
func LoadConfig(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("events config: read: %w", err)
	}
	if len(data) > MaxConfigSize {
		return nil, &ConfigError{Err: fmt.Errorf("larger than %d bytes", MaxConfigSize)}
	}
	return ParseConfig(data)
}

// ParseConfig parses and validates a rules file. Unknown keys are errors,
// so that a misspelt key does not silently widen a rule.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, &ConfigError{Err: err}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks every rule and fills in default names.
func (c *Config) Validate() error {
	if len(c.Rules) == 0 {
		return &ConfigError{Field: "rules", Err: errors.New("at least one rule is required")}
	}
	names := map[string]bool{}
	for i := range c.Rules {
		r := &c.Rules[i]
		at := fmt.Sprintf("rules[%d]", i)
		if r.Name == "" {
			r.Name = at
		}
		switch {
		case names[r.Name]:
			return &ConfigError{Field: at + ".name", Err: fmt.Errorf("%q is used by an earlier rule", r.Name)}
		case r.Source == "":
			return &ConfigError{Field: at + ".source", Err: errors.New("required")}
		}
		names[r.Name] = true
		if err := checkPath(r.ID); err != nil {
			return &ConfigError{Field: at + ".id", Err: err}
		}
		for p, vals := range r.When {
			if err := checkPath(p); err != nil {
				return &ConfigError{Field: at + ".when." + p, Err: err}
			}
			if len(vals) == 0 {
				return &ConfigError{Field: at + ".when." + p, Err: errors.New("lists no values")}
			}
		}
	}
	return nil
}

// maxPathDepth bounds a path's segments.
const maxPathDepth = 16

func checkPath(p string) error {
	if p == "" {
		return errors.New("required")
	}
	segs := strings.Split(p, ".")
	if len(segs) > maxPathDepth {
		return fmt.Errorf("more than %d segments", maxPathDepth)
	}
	for _, s := range segs {
		if s == "" {
			return fmt.Errorf("%q has an empty segment", p)
		}
	}
	return nil
}
