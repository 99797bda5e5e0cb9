package model

import "time"

// Window is the length of a usage snapshot's window: Hourly or Daily.
type Window string

// Usage windows.
const (
	Hourly Window = "hour"
	Daily  Window = "day"
)

// Duration is the window's length.
func (w Window) Duration() time.Duration {
	if w == Daily {
		return 24 * time.Hour
	}
	return time.Hour
}

// Start returns the start of the window holding t (UTC), in Unix ms.
func (w Window) Start(t int64) int64 {
	d := w.Duration().Milliseconds()
	if t < 0 {
		return (t - d + 1) / d * d
	}
	return t / d * d
}

// Valid reports whether w is a known window.
func (w Window) Valid() bool { return w == Hourly || w == Daily }

// Usage is what one entity consumed of one resource in one window.
type Usage struct {
	Entity   string
	Resource string
	Window   Window
	Start    time.Time
	// Consumed is the net tokens consumed per limit: acquires, adjustments
	// and rollbacks included.
	Consumed map[string]int64
	// Events counts the acquires, each once however many limits it used.
	Events int64
}

// UsageQuery selects the snapshots of one entity (every resource, or
// Resource only) or of one resource (every entity, Entity empty), in one
// window type, whose windows start in [From, To).
type UsageQuery struct {
	Entity   string
	Resource string
	Window   Window
	From, To time.Time
	// After continues a listing (the next value of the previous page).
	After string
	// Limit bounds the page (default and maximum MaxUsagePage).
	Limit int
}

// MaxUsagePage bounds one page of usage snapshots.
const MaxUsagePage = 1000

// UsageSummary totals the snapshots of a query.
type UsageSummary struct {
	// Windows is how many windows of the query's type [From, To) spans.
	Windows int64
	Events  int64
	Limits  map[string]LimitUsage
}

// LimitUsage totals one limit's net consumption.
type LimitUsage struct {
	Total int64
	// Average is Total over every window of the range, empty ones included.
	Average float64
	// Peak is the most consumed in one window (summed over the entities or
	// resources the query covers), and PeakStart when that window began.
	Peak      int64
	PeakStart time.Time
}

// ResourceCapacity is how much of a resource's limits is in use across its
// entities, now.
type ResourceCapacity struct {
	Resource string
	// Entities counts the buckets found: entities that used the resource
	// and are not back at full capacity (a backend may forget full
	// buckets, which would add capacity and availability alike).
	Entities int
	Limits   []LimitCapacity
}

// LimitCapacity sums one limit over a resource's buckets.
type LimitCapacity struct {
	Limit     string
	Kind      Kind
	Capacity  int64 // whole tokens, summed over the buckets
	Available int64 // whole tokens after refill, summed (debt counts negative)
	// Utilisation is 1 - Available/Capacity: the share of the summed
	// capacity in use.
	Utilisation float64
}
