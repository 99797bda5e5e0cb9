package codec_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/internal/codec"
)

// Every record reads back as it was written, and the stored form uses the
// codec's own field names (what a store holds does not follow package
// model's).
func TestRoundTrip(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	cfg := model.Config{Version: 7, OnUnavailable: model.OnUnavailable("allow"), Shadow: []string{"slots"}, AlertAt: []float64{0.8, 1}, Limits: []model.Limit{
		{Name: "rpm", Capacity: 100_000, RefillAmount: 100_000, RefillPeriod: time.Minute},
		{Name: "slots", Kind: model.Kind(1), Capacity: 5_000},
	}}
	ent := model.Entity{ID: "k1", Name: "key one", ParentID: "org", Cascade: true, Metadata: map[string]string{"tier": "pro"}, CreatedAt: at, Version: 3}
	ev := model.AuditEvent{ID: "01J", Time: at, Action: "config.set", Entity: "k1", Resource: "api", Principal: "ops", Details: map[string]string{"a": "b"}}
	ns := model.Namespace{Name: "team", ID: "a1b2", CreatedAt: at}
	key := model.Key{Name: "svc", Namespace: "team", Role: model.Role("acquire"), Entity: "k1", AllowLimits: true, Hash: "h", CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
	for _, c := range []struct {
		name   string
		enc    func() ([]byte, error)
		dec    func([]byte) (any, error)
		want   any
		fields []string
	}{
		{"config", func() ([]byte, error) { return codec.EncodeConfig(cfg) },
			func(b []byte) (any, error) { return codec.DecodeConfig(b) }, cfg, []string{`{"version":7,`, `"refill_period_ns"`, `"on_unavailable"`, `"shadow":["slots"]`, `"alert_at":[0.8,1]`}},
		// Version 0 (what the Redis backend encodes and its script fills
		// in) is left out, and reads as 1, as a config stored before
		// versions were kept does.
		{"config without limits", func() ([]byte, error) { return codec.EncodeConfig(model.Config{}) },
			func(b []byte) (any, error) { return codec.DecodeConfig(b) }, model.Config{Version: 1}, []string{`{"limits":[]`}},
		{"entity", func() ([]byte, error) { return codec.EncodeEntity(ent) },
			func(b []byte) (any, error) { return codec.DecodeEntity(b) }, ent, []string{`"parent_id":"org"`, `"version":3`}},
		{"entity stored before versions", func() ([]byte, error) { return []byte(`{"id":"k1","created_at":"2023-11-14T22:13:20.123Z"}`), nil },
			func(b []byte) (any, error) { return codec.DecodeEntity(b) }, model.Entity{ID: "k1", CreatedAt: at, Version: 1}, nil},
		{"event", func() ([]byte, error) { return codec.EncodeEvent(ev) },
			func(b []byte) (any, error) { return codec.DecodeEvent(b) }, ev, []string{`"action":"config.set"`}},
		{"namespace", func() ([]byte, error) { return codec.EncodeNamespace(ns) },
			func(b []byte) (any, error) { return codec.DecodeNamespace(b) }, ns, []string{`"deleted_at"`}},
		{"key", func() ([]byte, error) { return codec.EncodeKey("a1b2", key) },
			func(b []byte) (any, error) { return codec.DecodeKey(b) }, key, []string{`"namespace_id":"a1b2"`, `"expires_ms"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := c.enc()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range c.fields {
				if !strings.Contains(string(b), f) {
					t.Errorf("stored form %s lacks %s", b, f)
				}
			}
			got, err := c.dec(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("read back %+v, want %+v", got, c.want)
			}
		})
	}
}

// Bad stored forms are errors naming the record.
func TestDecodeErrors(t *testing.T) {
	if _, err := codec.DecodeConfig([]byte("{")); err == nil || !strings.HasPrefix(err.Error(), "config:") {
		t.Errorf("DecodeConfig of bad JSON: %v", err)
	}
	if _, err := codec.DecodeKey([]byte("[]")); err == nil || !strings.HasPrefix(err.Error(), "key:") {
		t.Errorf("DecodeKey of bad JSON: %v", err)
	}
}
