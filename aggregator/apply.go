package aggregator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tollgate-rl/tollgate/store"
)

// Increments turns changes into usage increments: each change counts in
// the hourly and the daily window holding its time, under its own Source
// and Seq, so that replaying it changes nothing. Snapshots are kept for
// retention after their window ends.
func Increments(changes []store.Change, retention time.Duration) map[string][]store.UsageIncrement {
	out := map[string][]store.UsageIncrement{}
	for _, c := range changes {
		for _, w := range Windows {
			key := store.UsageKey{Entity: c.Key.Entity, Resource: c.Key.Resource, Window: w, Start: w.Start(c.Time)}
			out[c.NS] = append(out[c.NS], store.UsageIncrement{
				Key: key, Consumed: c.Consumed, Events: c.Events, Source: c.Source, Seq: c.Seq,
				Expires: key.Start + (w.Duration() + retention).Milliseconds(),
			})
		}
	}
	return out
}

// Apply writes changes into us (see Increments).
func Apply(ctx context.Context, us store.UsageStore, changes []store.Change, retention time.Duration) error {
	batches := Increments(changes, retention)
	var errs []error
	for _, ns := range slices.Sorted(maps.Keys(batches)) {
		if err := us.AddUsage(ctx, ns, batches[ns]); err != nil {
			errs = append(errs, fmt.Errorf("aggregator: write usage of namespace %s: %w", ns, err))
		}
	}
	return errors.Join(errs...)
}
