// Package lossystore is test support: a store whose answers to durable
// acquires (a Consume with a lease record) are lost, as when a write's
// answer is lost to a timeout or a broken connection, for the tests of
// what the limiter, the server and the clients do about acquires of
// unknown outcome (docs/semantics.md 8). It wraps a real store.
package lossystore

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/tollgate-rl/tollgate/store"
)

// ErrLost is the error a lost answer is.
var ErrLost = errors.New("lossystore: the answer was lost")

// Mode is what becomes of a durable acquire.
type Mode int

// The modes.
const (
	// Pass: written and answered.
	Pass Mode = iota
	// Lost: written, and answered ErrLost.
	Lost
	// Late: answered ErrLost, and written when Land is called: a request
	// that reaches the store after its caller gave up on it.
	Late
	// Never: answered ErrLost, and never written.
	Never
)

// Store is a store.Store whose durable acquires fare as its mode says.
// Its GetLease may fail with ErrLost too (FailLooks).
type Store struct {
	store.Store

	mu        sync.Mutex
	mode      Mode
	held      []held
	failLooks bool
	looks     int
}

type held struct {
	ns  string
	req store.ConsumeRequest
}

// New returns a Store over inner, in mode Pass.
func New(inner store.Store) *Store { return &Store{Store: inner} }

// Set sets the mode of the durable acquires to come.
func (s *Store) Set(m Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode = m
}

// FailLooks makes GetLease fail with ErrLost (or work again).
func (s *Store) FailLooks(fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLooks = fail
}

// Looks returns how many times GetLease was called.
func (s *Store) Looks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.looks
}

// Consume passes req on, or loses its answer, as the mode says.
func (s *Store) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	s.mu.Lock()
	mode := s.mode
	if req.Lease == nil {
		mode = Pass
	}
	if mode == Late {
		// The caller may recycle req once Consume returns: keep a copy.
		c := *req
		c.Buckets = slices.Clone(req.Buckets)
		for i := range c.Buckets {
			c.Buckets[i].Limits = slices.Clone(c.Buckets[i].Limits)
			c.Buckets[i].Hint = nil
		}
		s.held = append(s.held, held{ns, c})
	}
	s.mu.Unlock()
	switch mode {
	case Lost:
		if _, err := s.Store.Consume(ctx, ns, req); err != nil {
			return false, err
		}
		return false, ErrLost
	case Late, Never:
		return false, ErrLost
	}
	return s.Store.Consume(ctx, ns, req)
}

// Land writes the acquires held in mode Late, and fails unless each is
// granted.
func (s *Store) Land(ctx context.Context) error {
	s.mu.Lock()
	hs := s.held
	s.held = nil
	s.mu.Unlock()
	for _, h := range hs {
		granted, err := s.Store.Consume(ctx, h.ns, &h.req)
		if err != nil {
			return err
		}
		if !granted {
			return errors.New("lossystore: a late write was refused")
		}
	}
	return nil
}

// GetLease reads the record of lease id, unless looks fail.
func (s *Store) GetLease(ctx context.Context, ns, id string) (store.LeaseRecord, error) {
	s.mu.Lock()
	s.looks++
	fail := s.failLooks
	s.mu.Unlock()
	if fail {
		return store.LeaseRecord{}, ErrLost
	}
	return s.Store.GetLease(ctx, ns, id)
}
