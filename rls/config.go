package rls

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
)

// MaxConfigSize is the largest configuration LoadConfig reads, in bytes.
const MaxConfigSize = 4 << 20

// ValuePlaceholder is replaced in a Rule's Entity by the value of the
// descriptor entry the rule matched.
const ValuePlaceholder = "{value}"

// Config maps Envoy rate-limit domains and descriptors to Tollgate entities,
// resources and limits. Read it with LoadConfig or ParseConfig, which
// validate it; a Config built in code should be checked with Validate.
type Config struct {
	// Domains lists the Envoy domains served; a request for any other
	// domain is answered OK for every descriptor.
	Domains []Domain `yaml:"domains" json:"domains"`
}

// Domain holds the rules of one Envoy rate-limit domain (the filter's
// domain setting).
type Domain struct {
	// Domain is the Envoy domain, e.g. "edge". Required and unique.
	Domain string `yaml:"domain" json:"domain"`
	// Namespace is the Tollgate namespace the domain's limits live in
	// (default "default"). Other namespaces must be registered in Tollgate.
	Namespace string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
	// Descriptors are the rules, tried in order; the first that matches a
	// request descriptor decides what it is charged to.
	Descriptors []Rule `yaml:"descriptors" json:"descriptors"`
}

// Rule maps the request descriptors that contain an entry with Key (and, if
// Value is set, that value) to one Tollgate acquire.
type Rule struct {
	// Key is the descriptor entry key to match, e.g. "remote_address".
	Key string `yaml:"key" json:"key"`
	// Value, if set, restricts the rule to entries with exactly this value.
	Value string `yaml:"value,omitempty" json:"value,omitempty"`
	// Entity is the Tollgate entity id: a fixed id, or a template in which
	// "{value}" stands for the matched entry's value (default "{value}").
	// A value that would make an invalid id is replaced by "h-" and the
	// first 32 hex digits of its SHA-256.
	Entity string `yaml:"entity,omitempty" json:"entity,omitempty"`
	// Resource is the Tollgate resource. Required.
	Resource string `yaml:"resource" json:"resource"`
	// Limits are rate limits in Tollgate's syntax (tollgate.ParseLimit),
	// e.g. "rps:10/sec" or "rpm:600/min:100". Every one is charged
	// hits_addend tokens. Empty means the limits stored in Tollgate for the
	// entity and resource, charged as Consume names.
	Limits []string `yaml:"limits,omitempty" json:"limits,omitempty"`
	// Consume names the stored limits to charge; required when Limits is
	// empty, and not allowed with Limits.
	Consume []string `yaml:"consume,omitempty" json:"consume,omitempty"`
}

// ConfigError reports an invalid configuration. Field locates the problem,
// e.g. "domains[0].descriptors[2].limits[1]".
type ConfigError struct {
	Field string
	Err   error
}

// Error names the field and the problem.
func (e *ConfigError) Error() string {
	if e.Field == "" {
		return "rls config: " + e.Err.Error()
	}
	return "rls config: " + e.Field + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// LoadConfig reads and validates a configuration in YAML, or in JSON when
// its first non-blank character is '{'. Unknown fields are errors.
func LoadConfig(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxConfigSize+1))
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	if len(data) > MaxConfigSize {
		return nil, &ConfigError{Err: fmt.Errorf("larger than %d bytes", MaxConfigSize)}
	}
	return ParseConfig(data)
}

// ParseConfig parses and validates a configuration (see LoadConfig).
func ParseConfig(data []byte) (*Config, error) {
	cfg := &Config{}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, &ConfigError{Err: errors.New("empty configuration")}
	}
	var err error
	if trimmed[0] == '{' {
		err = decodeJSON(trimmed, cfg)
	} else {
		err = decodeYAML(trimmed, cfg)
	}
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func decodeJSON(data []byte, cfg *Config) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return fmt.Errorf("JSON: %w", err)
	}
	if dec.More() {
		return errors.New("JSON: unexpected data after the configuration")
	}
	return nil
}

func decodeYAML(data []byte, cfg *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		return fmt.Errorf("YAML: %w", err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return errors.New("YAML: more than one document")
	}
	return nil
}

// Validate reports the first problem of c as a *ConfigError.
func (c *Config) Validate() error {
	_, err := compile(c)
	return err
}

// table is a compiled Config: the rules of every domain.
type table map[string]*domainRules

type domainRules struct {
	namespace string
	rules     []rule
}

// rule is a compiled Rule.
type rule struct {
	key, value string
	hasValue   bool
	entity     string // template; fixed when !templated
	templated  bool
	resource   string
	// limits are the explicit limits (nil for stored limits), opts the
	// acquire options that carry them.
	limits []tollgate.Limit
	opts   []tollgate.AcquireOption
	names  []string // the limits to charge
}

func compile(c *Config) (table, error) {
	if c == nil || len(c.Domains) == 0 {
		return nil, &ConfigError{Field: "domains", Err: errors.New("at least one domain is required")}
	}
	t := make(table, len(c.Domains))
	for i, d := range c.Domains {
		field := fmt.Sprintf("domains[%d]", i)
		if _, dup := t[d.Domain]; dup {
			return nil, &ConfigError{Field: field + ".domain", Err: fmt.Errorf("domain %q is defined twice", d.Domain)}
		}
		dr, err := compileDomain(field, d)
		if err != nil {
			return nil, err
		}
		t[d.Domain] = dr
	}
	return t, nil
}

func compileDomain(field string, d Domain) (*domainRules, error) {
	if d.Domain == "" {
		return nil, &ConfigError{Field: field + ".domain", Err: errors.New("required")}
	}
	if len(d.Domain) > MaxNameBytes {
		return nil, &ConfigError{Field: field + ".domain", Err: fmt.Errorf("%d bytes: at most %d are allowed", len(d.Domain), MaxNameBytes)}
	}
	ns := d.Namespace
	if ns == "" {
		ns = tollgate.DefaultNamespace
	}
	if err := model.ValidateNamespace(ns); err != nil {
		return nil, &ConfigError{Field: field + ".namespace", Err: err}
	}
	if len(d.Descriptors) == 0 {
		return nil, &ConfigError{Field: field + ".descriptors", Err: errors.New("at least one descriptor rule is required")}
	}
	dr := &domainRules{namespace: ns, rules: make([]rule, 0, len(d.Descriptors))}
	for j, r := range d.Descriptors {
		rf := fmt.Sprintf("%s.descriptors[%d]", field, j)
		cr, err := compileRule(rf, r)
		if err != nil {
			return nil, err
		}
		if k := shadowedBy(dr.rules, cr); k >= 0 {
			return nil, &ConfigError{Field: rf, Err: fmt.Errorf("unreachable: %s.descriptors[%d] already matches key %q%s",
				field, k, cr.key, valueSuffix(dr.rules[k]))}
		}
		dr.rules = append(dr.rules, cr)
	}
	return dr, nil
}

// shadowedBy returns the index of an earlier rule that matches every
// descriptor r matches, or -1.
func shadowedBy(earlier []rule, r rule) int {
	for k, e := range earlier {
		if e.key == r.key && (!e.hasValue || (r.hasValue && e.value == r.value)) {
			return k
		}
	}
	return -1
}

func valueSuffix(r rule) string {
	if !r.hasValue {
		return " with any value"
	}
	return fmt.Sprintf(" with value %q", r.value)
}

func compileRule(field string, r Rule) (rule, error) {
	if r.Key == "" {
		return rule{}, &ConfigError{Field: field + ".key", Err: errors.New("required")}
	}
	if len(r.Key) > MaxNameBytes {
		return rule{}, &ConfigError{Field: field + ".key", Err: fmt.Errorf("%d bytes: at most %d are allowed", len(r.Key), MaxNameBytes)}
	}
	cr := rule{key: r.Key, value: r.Value, hasValue: r.Value != "", resource: r.Resource}
	if err := model.ValidateResource(r.Resource); err != nil {
		return rule{}, &ConfigError{Field: field + ".resource", Err: err}
	}
	if err := cr.setEntity(r.Entity); err != nil {
		return rule{}, &ConfigError{Field: field + ".entity", Err: err}
	}
	if err := cr.setLimits(field, r.Limits, r.Consume); err != nil {
		return rule{}, err
	}
	return cr, nil
}

// setEntity checks the entity template: every id it can produce, including
// the hashed fallback, must be valid.
func (r *rule) setEntity(template string) error {
	if template == "" {
		template = ValuePlaceholder
	}
	rest := strings.ReplaceAll(template, ValuePlaceholder, "")
	if strings.ContainsAny(rest, "{}") {
		return fmt.Errorf("%q: the only placeholder is %s", template, ValuePlaceholder)
	}
	r.entity, r.templated = template, rest != template
	if !r.templated {
		return model.ValidateEntityID(template)
	}
	if err := model.ValidateEntityID(strings.ReplaceAll(template, ValuePlaceholder, "0")); err != nil {
		return fmt.Errorf("%q is not a valid entity id template: %w", template, err)
	}
	// The fallback for any value is the hashed form: it must fit.
	if err := model.ValidateEntityID(strings.ReplaceAll(template, ValuePlaceholder, hashValue(""))); err != nil {
		return fmt.Errorf("%q is too long to hold a hashed value: %w", template, err)
	}
	return nil
}

func (r *rule) setLimits(field string, texts, consume []string) error {
	if len(texts) == 0 {
		return r.setConsume(field+".consume", consume)
	}
	if len(consume) > 0 {
		return &ConfigError{Field: field + ".consume", Err: errors.New("not allowed with limits: every limit is charged")}
	}
	for i, text := range texts {
		l, err := tollgate.ParseLimit(text)
		if err != nil {
			return &ConfigError{Field: fmt.Sprintf("%s.limits[%d]", field, i), Err: err}
		}
		if l.Kind != tollgate.Rate {
			return &ConfigError{Field: fmt.Sprintf("%s.limits[%d]", field, i),
				Err: fmt.Errorf("%q: %s limits do not apply (no lease outlives the call)", text, l.Kind)}
		}
		r.limits = append(r.limits, l)
		r.names = append(r.names, l.Name)
	}
	if err := model.ValidateLimits(r.limits); err != nil {
		return &ConfigError{Field: field + ".limits", Err: err}
	}
	r.opts = []tollgate.AcquireOption{tollgate.WithLimits(r.limits...)}
	return nil
}

func (r *rule) setConsume(field string, names []string) error {
	if len(names) == 0 {
		return &ConfigError{Field: field, Err: errors.New("required when limits are omitted: name the stored limits to charge")}
	}
	for i, n := range names {
		if err := model.ValidateLimitName(n); err != nil {
			return &ConfigError{Field: fmt.Sprintf("%s[%d]", field, i), Err: err}
		}
		for _, prev := range names[:i] {
			if prev == n {
				return &ConfigError{Field: fmt.Sprintf("%s[%d]", field, i), Err: fmt.Errorf("%q is named twice", n)}
			}
		}
	}
	r.names = append([]string(nil), names...)
	return nil
}
