package reconcile

import (
	"context"
	"fmt"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// sweep deletes the audit events of ns older than its retention, if it
// has one, the store can, and the namespace's last sweep is at least
// sweepEvery ago: up to maxSweepBatches batches of sweepBatch, oldest
// first. Any number of reconcilers may sweep at once: an event is deleted
// once, whoever deletes it.
func (r *Reconciler) sweep(ctx context.Context, ns model.Namespace) error {
	log, ok := r.store.(store.AuditLog)
	if !ok || ns.AuditRetention <= 0 || r.sweepEvery < 0 {
		return nil
	}
	now := r.clock.Now()
	r.sweptMu.Lock()
	last, seen := r.swept[ns.ID]
	due := !seen || now.Sub(last) >= r.sweepEvery
	if due {
		r.swept[ns.ID] = now
	}
	r.sweptMu.Unlock()
	if !due {
		return nil
	}
	before := now.Add(-ns.AuditRetention)
	for range maxSweepBatches {
		n, err := log.SweepAudit(ctx, ns.ID, before, sweepBatch)
		r.sweptEvents.Add(uint64(max(n, 0)))
		if err != nil {
			r.failed.Add(1)
			return fmt.Errorf("reconcile: namespace %q: sweep audit: %w", ns.Name, err)
		}
		if n < sweepBatch || ctx.Err() != nil {
			return nil
		}
	}
	return nil
}
