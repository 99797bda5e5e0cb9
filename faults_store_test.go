package tollgate_test

import (
	"context"

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
