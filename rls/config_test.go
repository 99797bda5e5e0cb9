package rls_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/rls"
)

func TestParseConfigYAMLAndJSON(t *testing.T) {
	yamlText := `
domains:
  - domain: edge
    descriptors:
      - key: api_key
        entity: "{value}"
        resource: http
        limits: ["rps:10/sec"]
      - key: remote_address
        entity: "ip-{value}"
        resource: http
        limits: ["rpm:600/min:100"]
`
	jsonText := `{"domains": [{"domain": "edge", "namespace": "default", "descriptors": [
		{"key": "api_key", "resource": "http", "limits": ["rps:10/sec"]},
		{"key": "user", "value": "bot", "entity": "bots", "resource": "http", "consume": ["rpm"]}]}]}`
	for name, text := range map[string]string{"yaml": yamlText, "json": jsonText} {
		cfg, err := rls.LoadConfig(strings.NewReader(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(cfg.Domains) != 1 || len(cfg.Domains[0].Descriptors) != 2 || cfg.Domains[0].Descriptors[0].Key != "api_key" {
			t.Errorf("%s: parsed %+v", name, cfg)
		}
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	rule := func(fields string) string {
		return "domains:\n  - domain: edge\n    descriptors:\n      - " + fields + "\n"
	}
	cases := []struct {
		name, text, field, reason string
	}{
		{"empty", "  \n", "", "empty"},
		{"no domains", "domains: []", "domains", "at least one"},
		{"unknown field", rule("{key: k, resource: r, limits: [rpm:1], entiti: x}"), "", "entiti"},
		{"unknown json field", `{"domains": [], "extra": 1}`, "", "extra"},
		{"two documents", "domains: []\n---\ndomains: []\n", "", "more than one"},
		{"empty domain", "domains:\n  - descriptors: [{key: k, resource: r, limits: [rpm:1]}]", "domains[0].domain", "required"},
		{"duplicate domain", "domains:\n  - {domain: d, descriptors: [{key: k, resource: r, limits: [rpm:1]}]}\n  - {domain: d, descriptors: [{key: k, resource: r, limits: [rpm:1]}]}", "domains[1].domain", "twice"},
		{"bad namespace", "domains:\n  - {domain: d, namespace: 'a b', descriptors: [{key: k, resource: r, limits: [rpm:1]}]}", "domains[0].namespace", ""},
		{"no descriptors", "domains:\n  - domain: d", "domains[0].descriptors", "at least one"},
		{"domain too long", "domains:\n  - {domain: " + strings.Repeat("d", rls.MaxNameBytes+1) + ", descriptors: [{key: k, resource: r, limits: [rpm:1]}]}", "domains[0].domain", "at most 256"},
		{"no key", rule("{resource: r, limits: [rpm:1]}"), "domains[0].descriptors[0].key", "required"},
		{"key too long", rule("{key: " + strings.Repeat("k", rls.MaxNameBytes+1) + ", resource: r, limits: [rpm:1]}"), "domains[0].descriptors[0].key", "at most 256"},
		{"no resource", rule("{key: k, limits: [rpm:1]}"), "domains[0].descriptors[0].resource", ""},
		{"bad resource", rule("{key: k, resource: 9r, limits: [rpm:1]}"), "domains[0].descriptors[0].resource", ""},
		{"bad fixed entity", rule("{key: k, entity: 'a b', resource: r, limits: [rpm:1]}"), "domains[0].descriptors[0].entity", ""},
		{"unknown placeholder", rule("{key: k, entity: '{key}-{value}', resource: r, limits: [rpm:1]}"), "domains[0].descriptors[0].entity", "placeholder"},
		{"bad template", rule("{key: k, entity: 'a/{value}', resource: r, limits: [rpm:1]}"), "domains[0].descriptors[0].entity", "not a valid entity id template"},
		{"template too long", rule("{key: k, entity: '" + strings.Repeat("a", 230) + "{value}', resource: r, limits: [rpm:1]}"), "domains[0].descriptors[0].entity", "too long to hold a hashed value"},
		{"bad limit unit", rule("{key: k, resource: r, limits: ['rps:10/s']}"), "domains[0].descriptors[0].limits[0]", "unit"},
		{"second limit bad", rule("{key: k, resource: r, limits: [rpm:1, 'tpm:x']}"), "domains[0].descriptors[0].limits[1]", ""},
		{"concurrency limit", rule("{key: k, resource: r, limits: ['c:5/concurrent']}"), "domains[0].descriptors[0].limits[0]", "concurrency"},
		{"duplicate limit", rule("{key: k, resource: r, limits: [rpm:1, 'rpm:2']}"), "domains[0].descriptors[0].limits", "duplicate"},
		{"consume with limits", rule("{key: k, resource: r, limits: [rpm:1], consume: [rpm]}"), "domains[0].descriptors[0].consume", "not allowed"},
		{"nothing to charge", rule("{key: k, resource: r}"), "domains[0].descriptors[0].consume", "required"},
		{"bad consume name", rule("{key: k, resource: r, consume: [_x]}"), "domains[0].descriptors[0].consume[0]", ""},
		{"repeated consume name", rule("{key: k, resource: r, consume: [a, a]}"), "domains[0].descriptors[0].consume[1]", "twice"},
		{"unreachable", rule("{key: k, resource: r, limits: [rpm:1]}\n      - {key: k, value: v, resource: r, limits: [rpm:1]}"), "domains[0].descriptors[1]", "unreachable"},
		{"repeated value", rule("{key: k, value: v, resource: r, limits: [rpm:1]}\n      - {key: k, value: v, resource: r, limits: [rpm:1]}"), "domains[0].descriptors[1]", "unreachable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := rls.ParseConfig([]byte(c.text))
			var ce *rls.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want a *ConfigError", err)
			}
			if ce.Field != c.field {
				t.Errorf("field %q, want %q (error: %v)", ce.Field, c.field, err)
			}
			if !strings.Contains(err.Error(), c.reason) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("error %q does not say %q and %q", err, c.field, c.reason)
			}
		})
	}
}

func TestValueRulesBeforeCatchAll(t *testing.T) {
	_, err := rls.ParseConfig([]byte(`
domains:
  - domain: edge
    descriptors:
      - {key: plan, value: gold, entity: gold, resource: r, limits: [rpm:100]}
      - {key: plan, value: free, entity: free, resource: r, limits: [rpm:1]}
      - {key: plan, resource: r, limits: [rpm:10]}
`))
	if err != nil {
		t.Fatalf("specific rules before a catch-all: %v", err)
	}
}

func TestLoadConfigTooLarge(t *testing.T) {
	_, err := rls.LoadConfig(strings.NewReader(strings.Repeat(" ", rls.MaxConfigSize+1)))
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("error %v, want too large", err)
	}
}
