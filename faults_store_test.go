package tollgate_test

import (
	"context"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Store method names understood by faultStore, beyond those of faults_test.go:
// the durable leases and penalties.
const (
	mGetLease    = "GetLease"
	mUpdateLease = "UpdateLease"
	mEndLease    = "EndLease"
	mListLeases  = "ListLeases"
)

func (f *faultStore) GetLease(ctx context.Context, ns, id string) (store.LeaseRecord, error) {
	if err := f.enter(mGetLease); err != nil {
		return store.LeaseRecord{}, err
	}
	return f.inner.GetLease(ctx, ns, id)
}

func (f *faultStore) UpdateLease(ctx context.Context, ns string, rec store.LeaseRecord) error {
	if err := f.enter(mUpdateLease); err != nil {
		return err
	}
	return f.inner.UpdateLease(ctx, ns, rec)
}

func (f *faultStore) EndLease(ctx context.Context, ns string, e store.LeaseEnding) error {
	if err := f.enter(mEndLease); err != nil {
		return err
	}
	return f.inner.EndLease(ctx, ns, e)
}

func (f *faultStore) ListLeases(ctx context.Context, ns string, q store.LeaseQuery) ([]store.LeaseRecord, string, error) {
	if err := f.enter(mListLeases); err != nil {
		return nil, "", err
	}
	return f.inner.ListLeases(ctx, ns, q)
}

const mPenalize = "Penalize"

func (f *faultStore) Penalize(ctx context.Context, ns string, req *store.PenaltyRequest) error {
	if err := f.enter(mPenalize); err != nil {
		return err
	}
	return f.inner.Penalize(ctx, ns, req)
}

func (f *faultStore) Reset(ctx context.Context, ns string, req *store.ResetRequest) error {
	if err := f.enter("Reset"); err != nil {
		return err
	}
	return f.inner.Reset(ctx, ns, req)
}

func (f *faultStore) CreateKey(ctx context.Context, ns string, k model.Key, ev model.AuditEvent) error {
	if err := f.enter("CreateKey"); err != nil {
		return err
	}
	return f.inner.CreateKey(ctx, ns, k, ev)
}

func (f *faultStore) KeyByHash(ctx context.Context, hash string) (model.Key, error) {
	if err := f.enter("KeyByHash"); err != nil {
		return model.Key{}, err
	}
	return f.inner.KeyByHash(ctx, hash)
}

func (f *faultStore) ListKeys(ctx context.Context, ns, after string, limit int) ([]model.Key, error) {
	if err := f.enter("ListKeys"); err != nil {
		return nil, err
	}
	return f.inner.ListKeys(ctx, ns, after, limit)
}

func (f *faultStore) DeleteKey(ctx context.Context, ns, name string, ev model.AuditEvent) error {
	if err := f.enter("DeleteKey"); err != nil {
		return err
	}
	return f.inner.DeleteKey(ctx, ns, name, ev)
}

const mGeneration = "Generation"

func (f *faultStore) Generation(ctx context.Context) (uint64, error) {
	if err := f.enter(mGeneration); err != nil {
		return 0, err
	}
	return f.inner.Generation(ctx)
}

func (f *faultStore) LocalGeneration() bool { return f.inner.LocalGeneration() }

// frozenStore is a store as a process sees it when other processes share
// it and it is told of none of their changes: its generation never
// moves, so only the cache TTL (or the change of an Admin following the
// limiter's change watch) brings their changes in. Tests of the TTL use it
// for the limiter that must not see a change.
type frozenStore struct{ store.Store }

func (frozenStore) Generation(context.Context) (uint64, error) { return 0, nil }
func (frozenStore) LocalGeneration() bool                      { return false }
