package model_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/model"
)

func metadata(n int) map[string]string {
	m := make(map[string]string, n)
	for i := 0; i < n; i++ {
		m["k"+strconv.Itoa(i)] = "v"
	}
	return m
}

func TestEntityValidate(t *testing.T) {
	tests := []struct {
		name   string
		e      model.Entity
		field  string // "" for valid
		reason string
	}{
		{"root", model.Entity{ID: "org-1"}, "", ""},
		{"root with name and metadata", model.Entity{ID: "org-1", Name: "Org One", Metadata: map[string]string{"tier": "gold"}}, "", ""},
		{"child", model.Entity{ID: "proj-1", ParentID: "org-1"}, "", ""},
		{"child with cascade", model.Entity{ID: "key-1", ParentID: "proj-1", Cascade: true}, "", ""},
		{"longest ids", model.Entity{ID: strings.Repeat("a", 256), ParentID: strings.Repeat("b", 256), Cascade: true}, "", ""},
		{"longest name", model.Entity{ID: "e", Name: strings.Repeat("n", 256)}, "", ""},
		{"most metadata", model.Entity{ID: "e", Metadata: metadata(32)}, "", ""},
		{"longest metadata key and value", model.Entity{ID: "e", Metadata: map[string]string{strings.Repeat("k", 64): strings.Repeat("v", 1024)}}, "", ""},
		{"empty metadata value", model.Entity{ID: "e", Metadata: map[string]string{"k": ""}}, "", ""},

		{"empty id", model.Entity{}, "entity", "must not be empty"},
		{"bad id", model.Entity{ID: "-org"}, "entity", "must start with"},
		{"id too long", model.Entity{ID: strings.Repeat("a", 257)}, "entity", "longer than 256"},
		{"cascade without parent", model.Entity{ID: "key-1", Cascade: true}, "cascade", "needs a parent"},
		{"own parent", model.Entity{ID: "org-1", ParentID: "org-1"}, "parent_id", "own parent"},
		{"own parent with cascade", model.Entity{ID: "org-1", ParentID: "org-1", Cascade: true}, "parent_id", "own parent"},
		{"bad parent id", model.Entity{ID: "key-1", ParentID: "bad parent"}, "parent_id", `" " at byte 3`},
		{"parent id with bad start", model.Entity{ID: "key-1", ParentID: "_org", Cascade: true}, "parent_id", "must start with"},
		{"parent id too long", model.Entity{ID: "key-1", ParentID: strings.Repeat("p", 257)}, "parent_id", "longer than 256"},
		{"name too long", model.Entity{ID: "e", Name: strings.Repeat("n", 257)}, "name", "longer than 256"},
		{"too much metadata", model.Entity{ID: "e", Metadata: metadata(33)}, "metadata", "at most 32"},
		{"empty metadata key", model.Entity{ID: "e", Metadata: map[string]string{"": "v"}}, "metadata", "1 to 64"},
		{"metadata key too long", model.Entity{ID: "e", Metadata: map[string]string{strings.Repeat("k", 65): "v"}}, "metadata", "1 to 64"},
		{"metadata value too long", model.Entity{ID: "e", Metadata: map[string]string{"tier": strings.Repeat("v", 1025)}}, "metadata.tier", "longer than 1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.e.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			wantInvalid(t, err, tt.field, tt.reason)
		})
	}
}

func TestOnUnavailableValidate(t *testing.T) {
	for _, m := range []model.OnUnavailable{"", model.Block, model.Allow, "block", "allow"} {
		if err := m.Validate(); err != nil {
			t.Errorf("OnUnavailable(%q).Validate() = %v, want nil", m, err)
		}
	}
	for _, m := range []model.OnUnavailable{"Block", "ALLOW", "deny", " allow", "block ", "open"} {
		ve := wantInvalid(t, m.Validate(), "on_unavailable", "")
		if ve.Value != string(m) {
			t.Errorf("OnUnavailable(%q): Value = %q", m, ve.Value)
		}
	}
}

func TestScopeConstructorsAndLevel(t *testing.T) {
	tests := []struct {
		name  string
		got   model.Scope
		want  model.Scope
		level string
	}{
		{"system", model.SystemScope(), model.Scope{}, "system"},
		{"resource", model.ResourceScope("openai/gpt-4o"), model.Scope{Resource: "openai/gpt-4o"}, "resource"},
		{"entity default", model.EntityScope("org-1", ""), model.Scope{Entity: "org-1", Resource: "_default_"}, "entity-default"},
		{"entity default spelled out", model.EntityScope("org-1", model.DefaultResource), model.Scope{Entity: "org-1", Resource: "_default_"}, "entity-default"},
		{"entity", model.EntityScope("org-1", "gpt-4o"), model.Scope{Entity: "org-1", Resource: "gpt-4o"}, "entity"},
	}
	if model.DefaultResource != "_default_" {
		t.Errorf("DefaultResource = %q, want %q", model.DefaultResource, "_default_")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %+v, want %+v", tt.got, tt.want)
			}
			if l := tt.got.Level(); l != tt.level {
				t.Errorf("Level() = %q, want %q", l, tt.level)
			}
			if err := tt.got.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestScopeValidate(t *testing.T) {
	tests := []struct {
		name   string
		s      model.Scope
		field  string // "" for valid
		reason string
	}{
		{"system", model.Scope{}, "", ""},
		{"resource", model.Scope{Resource: "openai/gpt-4o"}, "", ""},
		{"entity default", model.Scope{Entity: "org-1", Resource: "_default_"}, "", ""},
		{"entity and resource", model.Scope{Entity: "user@example.com", Resource: "gpt-4o"}, "", ""},

		{"default resource without entity", model.Scope{Resource: "_default_"}, "resource", "must start with a letter"},
		{"bad resource", model.Scope{Resource: "4o"}, "resource", "must start with a letter"},
		{"resource too long", model.Scope{Resource: strings.Repeat("r", 65)}, "resource", "longer than 64"},
		{"entity without resource", model.Scope{Entity: "org-1"}, "resource", "_default_"},
		{"bad entity", model.Scope{Entity: "bad id", Resource: "gpt-4o"}, "entity", `" " at byte 3`},
		{"bad entity default", model.Scope{Entity: "-org", Resource: "_default_"}, "entity", "must start with"},
		{"entity with bad resource", model.Scope{Entity: "org-1", Resource: "gpt 4o"}, "resource", `" " at byte 3`},
		{"entity with other reserved resource", model.Scope{Entity: "org-1", Resource: "_other_"}, "resource", "must start with a letter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.s.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			wantInvalid(t, err, tt.field, tt.reason)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	limits := []model.Limit{model.PerMinute("rpm", 100), model.PerMinute("tpm", 10000).WithBurst(15000), model.ConcurrencyLimit("inflight", 4)}
	system := model.SystemScope()
	resource := model.ResourceScope("gpt-4o")
	entityDefault := model.EntityScope("org-1", "")
	entity := model.EntityScope("org-1", "gpt-4o")
	tests := []struct {
		name   string
		c      model.Config
		s      model.Scope
		field  string // "" for valid
		reason string
	}{
		{"empty system", model.Config{}, system, "", ""},
		{"limits at system", model.Config{Limits: limits}, system, "", ""},
		{"limits at resource", model.Config{Limits: limits}, resource, "", ""},
		{"limits at entity default", model.Config{Limits: limits}, entityDefault, "", ""},
		{"limits at entity", model.Config{Limits: limits}, entity, "", ""},
		{"block at system", model.Config{OnUnavailable: model.Block}, system, "", ""},
		{"allow at system with limits", model.Config{Limits: limits, OnUnavailable: model.Allow}, system, "", ""},
		{"shadow limits", model.Config{Limits: limits, Shadow: []string{"tpm", "inflight"}}, entity, "", ""},
		{"alert thresholds", model.Config{Limits: limits, AlertAt: []float64{0.5, 0.8, 0.95, 1}}, resource, "", ""},

		{"allow at resource", model.Config{OnUnavailable: model.Allow}, resource, "on_unavailable", "system level"},
		{"block at entity default", model.Config{Limits: limits, OnUnavailable: model.Block}, entityDefault, "on_unavailable", "system level"},
		{"allow at entity", model.Config{OnUnavailable: model.Allow}, entity, "on_unavailable", "system level"},
		{"unknown mode", model.Config{OnUnavailable: "deny"}, system, "on_unavailable", `"block" or "allow"`},
		{"invalid limit", model.Config{Limits: []model.Limit{model.PerMinute("rpm", 0)}}, system, "limit.rpm.capacity", "must be positive"},
		{"invalid limit name", model.Config{Limits: []model.Limit{model.PerMinute("_rpm", 1)}}, entity, "limit.name", "must start with a letter"},
		{"duplicate limits", model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1), model.PerSecond("rpm", 1)}}, resource, "limits", "duplicate"},
		{"shadow of no limit", model.Config{Limits: limits, Shadow: []string{"rpd"}}, resource, "shadow", "names no limit"},
		{"shadow twice", model.Config{Limits: limits, Shadow: []string{"rpm", "rpm"}}, resource, "shadow", "listed twice"},
		{"alert at zero", model.Config{Limits: limits, AlertAt: []float64{0}}, resource, "alert_at", "(0, 1]"},
		{"alert above one", model.Config{Limits: limits, AlertAt: []float64{1.5}}, resource, "alert_at", "(0, 1]"},
		{"alert at NaN", model.Config{Limits: limits, AlertAt: []float64{math.NaN()}}, resource, "alert_at", "(0, 1]"},
		{"alert descending", model.Config{Limits: limits, AlertAt: []float64{0.9, 0.8}}, resource, "alert_at", "ascending"},
		{"alert twice", model.Config{Limits: limits, AlertAt: []float64{0.8, 0.8}}, resource, "alert_at", "ascending"},
		{"too many alerts", model.Config{Limits: limits, AlertAt: []float64{0.1, 0.2, 0.3, 0.4, 0.5}}, resource, "alert_at", "at most 4"},
		{"shadow without limits", model.Config{Shadow: []string{"rpm"}}, system, "shadow", "names no limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate(tt.s)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", tt.s, err)
				}
				return
			}
			wantInvalid(t, err, tt.field, tt.reason)
		})
	}
}
