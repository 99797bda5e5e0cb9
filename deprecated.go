package tollgate

import (
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// The names of one release ago, kept for one release: every surface now
// calls a lease's lifetime its TTL, as the HTTP API (lease_ttl_ms) and the
// other clients do, and the instant it ends ExpiresAt.

// WithLeaseExpiry is WithLeaseTTL.
//
// Deprecated: use WithLeaseTTL.
func WithLeaseExpiry(d time.Duration) AcquireOption { return WithLeaseTTL(d) }

// WithDefaultLeaseExpiry is WithDefaultLeaseTTL.
//
// Deprecated: use WithDefaultLeaseTTL.
func WithDefaultLeaseExpiry(d time.Duration) Option { return WithDefaultLeaseTTL(d) }

// Old names of the lease TTL's default and bounds.
//
// Deprecated: use DefaultLeaseTTL, MinLeaseTTL and MaxLeaseTTL.
const (
	DefaultLeaseExpiry = DefaultLeaseTTL
	MinLeaseExpiry     = model.MinLeaseExpiry
	MaxLeaseExpiry     = model.MaxLeaseExpiry
)

// Expires is ExpiresAt.
//
// Deprecated: use ExpiresAt.
func (le *Lease) Expires() time.Time { return le.ExpiresAt() }
