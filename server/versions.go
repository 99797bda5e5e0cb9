package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// Optimistic locking over HTTP (api.Precondition): GETs answer a
// record's version as its ETag; If-Match and If-None-Match make a change
// conditional on it.

// maxReadWriteAttempts bounds how often a change that reads the record
// before it writes (a PATCH, a PUT of limits without If-Match) reads
// again because another change came in between.
const maxReadWriteAttempts = 8

// precondition reads r's If-Match and If-None-Match (api.Precondition).
func precondition(r *http.Request) ([]model.WriteOption, error) {
	return api.Precondition(r.Header.Get(api.IfMatchHeader), r.Header.Get(api.IfNoneMatchHeader))
}

// setETag answers version v as the ETag, unless err.
func setETag(w http.ResponseWriter, v int64, err error) {
	if err == nil && v > 0 {
		w.Header().Set(api.ETagHeader, api.ETag(v))
	}
}

// expected is the version pre requires (pre as precondition returns it).
func expected(pre []model.WriteOption) (int64, bool) {
	if o := model.WriteSettingsOf(pre...); o.Expect != nil {
		return *o.Expect, true
	}
	return 0, false
}

// patchEntity applies p to the entity id as stored: it reads the entity
// and updates it on the version read, so that a concurrent change is
// never lost to the patch (the other change's fields stay). With pre
// (If-Match), the entity read must be at its version, and a change in
// between is the caller's 412; without, the patch reads again and
// retries, and after maxReadWriteAttempts writes unconditionally, as a
// PATCH always did.
func patchEntity(ctx context.Context, adm admin, id string, p api.EntityPatch, pre, opts []model.WriteOption) (model.Entity, error) {
	want, conditional := expected(pre)
	for attempt := 1; ; attempt++ {
		cur, err := adm.GetEntity(ctx, id)
		if err != nil {
			return model.Entity{}, err
		}
		if conditional && cur.Version != want {
			return model.Entity{}, model.VersionMismatch(want, cur.Version)
		}
		on := append(opts[:len(opts):len(opts)], tollgate.IfVersion(cur.Version))
		if !conditional && attempt == maxReadWriteAttempts {
			on = opts
		}
		updated, err := adm.UpdateEntity(ctx, p.Apply(cur), on...)
		if conditional || attempt == maxReadWriteAttempts || !errors.Is(err, model.ErrPreconditionFailed) {
			return updated, err
		}
	}
}

// putConfig stores cfg at scope and returns the version it stored. With
// pre (If-Match, If-None-Match) it is that version's successor; without,
// the version replaced is read and the put made on it, read again if
// another put came in between, so that the version answered is exactly
// the one written (after maxReadWriteAttempts the put is unconditional
// and the version read back).
func putConfig(ctx context.Context, adm admin, scope model.Scope, cfg model.Config, pre, opts []model.WriteOption) (int64, error) {
	if want, ok := expected(pre); ok {
		return want + 1, adm.SetLimits(ctx, scope, cfg, append(opts[:len(opts):len(opts)], pre...)...)
	}
	for range maxReadWriteAttempts - 1 {
		cur, err := adm.GetLimits(ctx, scope)
		if err != nil && !errors.Is(err, model.ErrNotFound) {
			return 0, err
		}
		err = adm.SetLimits(ctx, scope, cfg, append(opts[:len(opts):len(opts)], tollgate.IfVersion(cur.Version))...)
		if !errors.Is(err, model.ErrPreconditionFailed) {
			return cur.Version + 1, err
		}
	}
	if err := adm.SetLimits(ctx, scope, cfg, opts...); err != nil {
		return 0, err
	}
	stored, err := adm.GetLimits(ctx, scope)
	return stored.Version, err
}
