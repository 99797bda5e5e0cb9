// Package codec is the JSON form in which the embedded and Redis backends
// store the control plane's records: configurations, entities,
// namespaces, API keys and audit events. The types here have field names
// of their own, so that renaming a field in package model never changes
// what a store holds, and both backends share one definition of it.
package codec

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tollgate-rl/tollgate/calendar"
	"github.com/tollgate-rl/tollgate/model"
)

type limitJSON struct {
	Name     string        `json:"name"`
	Kind     uint8         `json:"kind,omitempty"`
	Capacity int64         `json:"capacity"`
	Amount   int64         `json:"refill_amount,omitempty"`
	Period   time.Duration `json:"refill_period_ns,omitempty"`
	// Window is a calendar quota's window, "month@UTC".
	Window string `json:"window,omitempty"`
}

// configJSON is a config's stored form. Its "version" comes first: the
// Redis backend's put script writes it in front of the rest (which
// EncodeConfig leaves without one when the version is 0).
type configJSON struct {
	Version       int64       `json:"version,omitempty"`
	Limits        []limitJSON `json:"limits"`
	Shadow        []string    `json:"shadow,omitempty"`
	AlertAt       []float64   `json:"alert_at,omitempty"`
	OnUnavailable string      `json:"on_unavailable,omitempty"`
}

// EncodeConfig returns the stored form of c.
func EncodeConfig(c model.Config) ([]byte, error) {
	out := configJSON{Version: c.Version, Limits: make([]limitJSON, len(c.Limits)), Shadow: c.Shadow, AlertAt: c.AlertAt, OnUnavailable: string(c.OnUnavailable)}
	for i, l := range c.Limits {
		out.Limits[i] = limitJSON{Name: l.Name, Kind: uint8(l.Kind), Capacity: l.Capacity, Amount: l.RefillAmount, Period: l.RefillPeriod,
			Window: l.Window.String()}
	}
	return json.Marshal(out)
}

// DecodeConfig reads what EncodeConfig wrote. A configuration without
// limits has nil Limits, one without shadow limits nil Shadow, one
// without alert thresholds nil AlertAt; one stored without a version
// (before versions were kept) is at version 1.
func DecodeConfig(b []byte) (model.Config, error) {
	var in configJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return model.Config{}, fmt.Errorf("config: %w", err)
	}
	c := model.Config{Shadow: in.Shadow, AlertAt: in.AlertAt, OnUnavailable: model.OnUnavailable(in.OnUnavailable), Version: max(in.Version, 1)}
	if len(in.Limits) > 0 {
		c.Limits = make([]model.Limit, len(in.Limits))
	}
	for i, l := range in.Limits {
		c.Limits[i] = model.Limit{Name: l.Name, Kind: model.Kind(l.Kind), Capacity: l.Capacity, RefillAmount: l.Amount, RefillPeriod: l.Period}
		if l.Window != "" {
			w, err := calendar.Parse(l.Window)
			if err != nil {
				return model.Config{}, fmt.Errorf("config: limit %s: window %q: %w", l.Name, l.Window, err)
			}
			c.Limits[i].Window = w
		}
	}
	return c, nil
}

// entityJSON is an entity's stored form. The Redis backend's scripts read
// its "parent_id".
type entityJSON struct {
	ID        string            `json:"id"`
	Name      string            `json:"name,omitempty"`
	ParentID  string            `json:"parent_id,omitempty"`
	Cascade   bool              `json:"cascade,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	Version   int64             `json:"version,omitempty"`
}

// EncodeEntity returns the stored form of e.
func EncodeEntity(e model.Entity) ([]byte, error) { return json.Marshal(entityJSON(e)) }

// DecodeEntity reads what EncodeEntity wrote. An entity stored without a
// version (before versions were kept) is at version 1.
func DecodeEntity(b []byte) (model.Entity, error) {
	var in entityJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return model.Entity{}, fmt.Errorf("entity: %w", err)
	}
	in.Version = max(in.Version, 1)
	return model.Entity(in), nil
}

type eventJSON struct {
	ID        string            `json:"id"`
	Time      time.Time         `json:"time"`
	Action    string            `json:"action"`
	Entity    string            `json:"entity,omitempty"`
	Resource  string            `json:"resource,omitempty"`
	Principal string            `json:"principal,omitempty"`
	Details   map[string]string `json:"details,omitempty"`
}

// EncodeEvent returns the stored form of ev.
func EncodeEvent(ev model.AuditEvent) ([]byte, error) { return json.Marshal(eventJSON(ev)) }

// DecodeEvent reads what EncodeEvent wrote.
func DecodeEvent(b []byte) (model.AuditEvent, error) {
	var in eventJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return model.AuditEvent{}, fmt.Errorf("audit event: %w", err)
	}
	return model.AuditEvent(in), nil
}

type namespaceJSON struct {
	Name      string    `json:"name"`
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	DeletedAt time.Time `json:"deleted_at"`
	// AuditRetention is nanoseconds; absent (older records): forever.
	AuditRetention time.Duration `json:"audit_retention,omitempty"`
}

// EncodeNamespace returns the stored form of n.
func EncodeNamespace(n model.Namespace) ([]byte, error) { return json.Marshal(namespaceJSON(n)) }

// DecodeNamespace reads what EncodeNamespace wrote.
func DecodeNamespace(b []byte) (model.Namespace, error) {
	var in namespaceJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return model.Namespace{}, fmt.Errorf("namespace: %w", err)
	}
	return model.Namespace(in), nil
}

// keyJSON is a stored API key. Times are Unix milliseconds (0: no
// expiry), so that they read back in UTC at the precision every backend
// keeps; NamespaceID says whose key it is.
type keyJSON struct {
	Name        string `json:"name"`
	Namespace   string `json:"namespace"`
	NamespaceID string `json:"namespace_id"`
	Role        string `json:"role"`
	Entity      string `json:"entity,omitempty"`
	AllowLimits bool   `json:"allow_limits,omitempty"`
	Hash        string `json:"hash"`
	CreatedAt   int64  `json:"created_ms"`
	ExpiresAt   int64  `json:"expires_ms,omitempty"`
}

// EncodeKey returns the stored form of k, a key of the namespace whose id
// is ns.
func EncodeKey(ns string, k model.Key) ([]byte, error) {
	return json.Marshal(keyJSON{Name: k.Name, Namespace: k.Namespace, NamespaceID: ns, Role: string(k.Role), Entity: k.Entity,
		AllowLimits: k.AllowLimits, Hash: k.Hash, CreatedAt: model.UnixMilli(k.CreatedAt), ExpiresAt: model.UnixMilli(k.ExpiresAt)})
}

// DecodeKey reads what EncodeKey wrote.
func DecodeKey(b []byte) (model.Key, error) {
	var in keyJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return model.Key{}, fmt.Errorf("key: %w", err)
	}
	return model.Key{Name: in.Name, Namespace: in.Namespace, Role: model.Role(in.Role), Entity: in.Entity,
		AllowLimits: in.AllowLimits, Hash: in.Hash, CreatedAt: model.FromUnixMilli(in.CreatedAt), ExpiresAt: model.FromUnixMilli(in.ExpiresAt)}, nil
}
