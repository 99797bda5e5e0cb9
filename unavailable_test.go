package tollgate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
)

// errQuotaFrozen is a domain error no list in the limiter knows of: an
// answer of a store about the data, made with model.NewDomainError.
var errQuotaFrozen = model.NewDomainError("quota frozen")

// A store's domain error is returned as it is in Allow mode, whichever call
// of an acquire the store answers with it, and never degrades the acquire;
// an error that is not marked as one degrades it.
func TestUnavailableOnlyForErrorsNotInTheDomain(t *testing.T) {
	ctx := context.Background()
	allow := tollgate.WithOnUnavailable(tollgate.Allow)
	for _, method := range []string{mConsume, mGetEntity, mGetNamespace} {
		lim, fs, _ := newFaultLim(t)
		fs.failOn(errQuotaFrozen, method)
		le, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, rpm100, allow)
		if !errors.Is(err, errQuotaFrozen) || errors.Is(err, tollgate.ErrUnavailable) || le != nil {
			t.Errorf("%s answers a domain error: lease %s, err %v; want the domain error, not degraded", method, descLease(le), err)
		}
		if lim.Stats().Degraded != 0 {
			t.Errorf("%s answers a domain error: %d degraded leases, want 0", method, lim.Stats().Degraded)
		}

		fs.failOn(errors.New("disk on fire"), method)
		le, err = lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, rpm100, allow)
		if err != nil || !le.Degraded() || !errors.Is(le.Cause(), tollgate.ErrUnavailable) {
			t.Errorf("%s fails: lease %s, err %v; want a degraded lease", method, descLease(le), err)
		}
	}
}

// In Block mode the same domain error is returned, wrapped with what the
// limiter was doing, rather than as an *UnavailableError.
func TestUnavailableBlockReturnsDomainErrors(t *testing.T) {
	lim, fs, _ := newFaultLim(t)
	fs.failOn(errQuotaFrozen, mConsume)
	_, err := lim.Acquire(context.Background(), "key-1", "api", tollgate.Consume{"rpm": 1}, rpm100)
	var ue *tollgate.UnavailableError
	if !errors.Is(err, errQuotaFrozen) || errors.As(err, &ue) {
		t.Errorf("err = %v (%T), want the domain error, not an *UnavailableError", err, err)
	}
}
