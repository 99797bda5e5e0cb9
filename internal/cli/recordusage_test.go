package cli

import (
	"log/slog"
	"testing"

	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// fedStore is a memory store that says whether its writes reach a change
// feed of its own, as the DynamoDB store does.
type fedStore struct {
	*memory.Store
	feeds bool
}

func (f fedStore) FeedsChanges() bool { return f.feeds }

// The server records usage in-process for stores that keep usage and have
// no change feed of their own, and leaves the others alone: a store whose
// writes feed their own change feed (store.ChangeFeeder) gets its usage
// from it, and recording as well would count every write twice.
func TestRecordUsage(t *testing.T) {
	for _, c := range []struct {
		name   string
		st     store.Store
		record bool
	}{
		{"memory", memory.New(), true},
		{"own change feed", fedStore{memory.New(), true}, false},
		{"no change feed after all", fedStore{memory.New(), false}, true},
		{"no usage store", struct{ store.Store }{memory.New()}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, stop := recordUsage(c.st, slog.New(slog.DiscardHandler), aggregator.DefaultRetention)
			defer stop()
			if _, recorded := got.(*aggregator.Recorder); recorded != c.record {
				t.Errorf("recorded %v, want %v", recorded, c.record)
			}
		})
	}
}
