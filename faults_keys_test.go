package tollgate_test

import (
	"context"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// The parts of store.Store that the issue 20 contract added (stored API
// keys, the change generation, bucket resets): the fault store passes
// them through without faults, as no test here injects any into them yet.

func (f *faultStore) CreateKey(ctx context.Context, ns string, k model.Key, ev model.AuditEvent) error {
	return f.inner.CreateKey(ctx, ns, k, ev)
}

func (f *faultStore) KeyByHash(ctx context.Context, hash string) (model.Key, error) {
	return f.inner.KeyByHash(ctx, hash)
}

func (f *faultStore) ListKeys(ctx context.Context, ns, after string, limit int) ([]model.Key, error) {
	return f.inner.ListKeys(ctx, ns, after, limit)
}

func (f *faultStore) DeleteKey(ctx context.Context, ns, name string, ev model.AuditEvent) error {
	return f.inner.DeleteKey(ctx, ns, name, ev)
}

func (f *faultStore) Generation(ctx context.Context) (uint64, error) { return f.inner.Generation(ctx) }

func (f *faultStore) LocalGeneration() bool { return f.inner.LocalGeneration() }

func (f *faultStore) Reset(ctx context.Context, ns string, req *store.ResetRequest) error {
	return f.inner.Reset(ctx, ns, req)
}
