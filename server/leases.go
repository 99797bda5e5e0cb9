package server

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/tollgate-rl/tollgate"
)

// Lease states on the wire.
const (
	stateOpen       = "open"
	stateCommitted  = "committed"
	stateRolledBack = "rolled_back"
)

// tombstoneTTL bounds how long a closed lease is remembered (to answer 409
// rather than 404), or until it would have expired, whichever is first.
const tombstoneTTL = 5 * time.Minute

// serverLease is a lease the server holds for a client.
type serverLease struct {
	id      string
	ns      string
	lease   *tollgate.Lease
	expires time.Time
	state   string    // guarded by leaseTable.mu
	forget  time.Time // when a closed lease's tombstone goes

	// writing serialises the calls that write the lease's end (a client's
	// commit or rollback, the reaper, a namespace delete, a graceful stop)
	// with dropping it: once a namespace purge has dropped a lease, nothing
	// may write under the purged namespace's id.
	writing sync.Mutex
	dropped bool // guarded by writing
}

// write runs end (a Commit or Rollback of the lease) unless the lease was
// dropped, which is errLeaseNotFound.
func (l *serverLease) write(end func() error) error {
	l.writing.Lock()
	defer l.writing.Unlock()
	if l.dropped {
		return errLeaseNotFound
	}
	return end()
}

// drop makes every later write of l fail, waiting for one in progress.
func (l *serverLease) drop() {
	l.writing.Lock()
	defer l.writing.Unlock()
	l.dropped = true
}

// leaseTable holds the server's leases: open ones, counted per namespace
// against a cap, and tombstones of recently closed ones.
type leaseTable struct {
	mu    sync.Mutex
	byID  map[string]*serverLease
	perNS map[string]int
	max   int
}

func newLeaseTable(max int) *leaseTable {
	return &leaseTable{byID: map[string]*serverLease{}, perNS: map[string]int{}, max: max}
}

// reserve takes one of ns's open-lease slots, reporting false at the cap.
func (t *leaseTable) reserve(ns string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.perNS[ns] >= t.max {
		return false
	}
	t.perNS[ns]++
	return true
}

// release gives back a slot reserve took.
func (t *leaseTable) release(ns string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.releaseLocked(ns)
}

func (t *leaseTable) releaseLocked(ns string) {
	if t.perNS[ns]--; t.perNS[ns] <= 0 {
		delete(t.perNS, ns)
	}
}

// add stores an open lease in a slot already reserved.
func (t *leaseTable) add(ns string, le *tollgate.Lease, expires time.Time) *serverLease {
	l := &serverLease{id: newLeaseID(), ns: ns, lease: le, expires: expires, state: stateOpen}
	t.mu.Lock()
	t.byID[l.id] = l
	t.mu.Unlock()
	return l
}

// get finds an open lease of ns. A lease of another namespace, an expired
// or a forgotten one is not found; a closed one is ErrLeaseClosed.
func (t *leaseTable) get(ns, id string, now time.Time) (*serverLease, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.byID[id]
	switch {
	case !ok || l.ns != ns:
		return nil, errLeaseNotFound
	case l.state != stateOpen:
		return nil, errLeaseClosed
	case !now.Before(l.expires):
		return nil, errLeaseNotFound
	}
	return l, nil
}

// closeLease records that l ended in state, keeping a tombstone.
func (t *leaseTable) closeLease(l *serverLease, state string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l.state != stateOpen || t.byID[l.id] != l {
		return // closed already, or removed from the table meanwhile
	}
	l.state = state
	l.forget = now.Add(tombstoneTTL)
	if l.expires.Before(l.forget) {
		l.forget = l.expires
	}
	t.releaseLocked(l.ns)
}

// expired returns the open leases past their expiry (they stay in the table
// until closed, so a failed commit is retried), and drops old tombstones.
func (t *leaseTable) expired(now time.Time) []*serverLease {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*serverLease
	for id, l := range t.byID {
		switch {
		case l.state == stateOpen && !now.Before(l.expires):
			out = append(out, l)
		case l.state != stateOpen && !now.Before(l.forget):
			delete(t.byID, id)
		}
	}
	return out
}

// remove deletes l outright (an expired lease, committed by the reaper).
func (t *leaseTable) remove(l *serverLease) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[l.id] != l {
		return // removed already
	}
	if l.state == stateOpen {
		t.releaseLocked(l.ns)
	}
	delete(t.byID, l.id)
}

// openIn returns the open leases of namespace ns (they stay in the table).
func (t *leaseTable) openIn(ns string) []*serverLease {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*serverLease
	for _, l := range t.byID {
		if l.ns == ns && l.state == stateOpen {
			out = append(out, l)
		}
	}
	return out
}

// removeIn deletes every lease of namespace ns, open ones and tombstones,
// and returns them.
func (t *leaseTable) removeIn(ns string) []*serverLease {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*serverLease
	for id, l := range t.byID {
		if l.ns == ns {
			if l.state == stateOpen {
				t.releaseLocked(ns)
			}
			out = append(out, l)
			delete(t.byID, id)
		}
	}
	return out
}

// drain removes and returns every open lease.
func (t *leaseTable) drain() []*serverLease {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*serverLease
	for id, l := range t.byID {
		if l.state == stateOpen {
			out = append(out, l)
		}
		delete(t.byID, id)
	}
	clear(t.perNS)
	return out
}

// open counts the open leases.
func (t *leaseTable) open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.perNS {
		n += c
	}
	return n
}

func newLeaseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
