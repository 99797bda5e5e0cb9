package dynamodb

import (
	"context"

	"github.com/tollgate-rl/tollgate/store"
)

// Consume implements store.Buckets.
func (s *Store) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	b := s.newBudget()
	if req.Lease != nil {
		return s.consumeLeased(ctx, b, ns, req)
	}
	if req.Event != nil {
		return false, store.CheckConsumeEvent(req)
	}
	if len(req.Buckets) == 1 {
		return s.consumeOne(ctx, b, ns, &req.Buckets[0], req.Now)
	}
	return s.consumeMany(ctx, b, ns, req)
}
