package api

import (
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// LimitStatus is one limit's verdict or state (model.Status).
type LimitStatus struct {
	Entity    string `json:"entity"`
	Resource  string `json:"resource"`
	Limit     string `json:"limit"`
	Kind      string `json:"kind"` // "rate", "concurrency" or "reserved"
	Capacity  int64  `json:"capacity"`
	Available int64  `json:"available"`
	Requested int64  `json:"requested"`
	Exceeded  bool   `json:"exceeded"`
	// Shadow marks a limit enforced in shadow: exceeded, it says it would
	// have denied, and did not (model.Status.Shadow).
	Shadow bool `json:"shadow,omitempty"`
	// Source names the level that supplied the limit: "entity",
	// "entity-default", "resource", "system", or "call" (the request's own
	// limits); absent where not known (model.Status.Source).
	Source string `json:"source,omitempty"`
	// RetryAfterMS is exact however long (up to 2^63-1: model.Status's
	// RetryAfterMS); 0 for a reserved limit waiting for a release.
	RetryAfterMS int64 `json:"retry_after_ms"`
	// Waits says what an exceeded concurrency or reserved limit waits
	// for: "expiry" (retry_after_ms is the earliest expiry among its
	// holders) or "release" (no time is known); absent for a rate limit.
	Waits string `json:"waits,omitempty"`
	// ResetsAtMS is, for a calendar quota, when its current window ends
	// and it refills (Unix ms); absent for other limits.
	ResetsAtMS int64 `json:"resets_at_ms,omitempty"`
	// WindowMS is the span capacity is granted over (model.Status.Window):
	// a rate limit's refill from empty to full, a calendar quota's current
	// window; absent for concurrency and reserved limits.
	WindowMS int64 `json:"window_ms,omitempty"`
}

// FromStatus converts a status.
func FromStatus(s model.Status) LimitStatus {
	return LimitStatus{
		Entity: s.Entity, Resource: s.Resource, Limit: s.Limit, Kind: s.Kind.String(),
		Capacity: s.Capacity, Available: s.Available, Requested: s.Requested,
		Exceeded: s.Exceeded, Shadow: s.Shadow, Source: s.Source, RetryAfterMS: max(s.RetryAfterMS, CeilMS(s.RetryAfter)), Waits: s.Waits,
		ResetsAtMS: unixMS(s.ResetsAt), WindowMS: CeilMS(s.Window),
	}
}

// unixMS is t in Unix milliseconds, 0 for the zero time.
func unixMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// timeMS is unixMS's inverse.
func timeMS(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// FromStatuses converts statuses; never nil.
func FromStatuses(ss []model.Status) []LimitStatus {
	out := make([]LimitStatus, len(ss))
	for i, s := range ss {
		out[i] = FromStatus(s)
	}
	return out
}

// ToStatus converts a status back.
func ToStatus(s LimitStatus) model.Status {
	kind, _ := model.ParseKind(s.Kind) // unknown: rate, as before kinds were named
	return model.Status{
		Entity: s.Entity, Resource: s.Resource, Limit: s.Limit, Kind: kind,
		Capacity: s.Capacity, Available: s.Available, Requested: s.Requested,
		Exceeded: s.Exceeded, Shadow: s.Shadow, Source: s.Source, RetryAfter: model.DurationMS(s.RetryAfterMS), RetryAfterMS: max(s.RetryAfterMS, 0),
		Waits: s.Waits, ResetsAt: timeMS(s.ResetsAtMS), Window: model.DurationMS(s.WindowMS),
	}
}

// ToStatuses converts statuses back.
func ToStatuses(ss []LimitStatus) []model.Status {
	out := make([]model.Status, len(ss))
	for i, s := range ss {
		out[i] = ToStatus(s)
	}
	return out
}

// CeilMS rounds d up to whole milliseconds, without overflow (model.CeilMS).
func CeilMS(d time.Duration) int64 { return model.CeilMS(d) }
