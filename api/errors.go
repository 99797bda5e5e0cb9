package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/tollgate-rl/tollgate/model"
)

// kinds name the sentinel behind a not_found or conflict, in Error.Reason,
// so the client can give back the same error the library would.
var kinds = []struct {
	err    error
	status int
	code   string
	reason string
}{
	{model.ErrEntityNotFound, http.StatusNotFound, CodeNotFound, "entity_not_found"},
	{model.ErrNamespaceNotFound, http.StatusNotFound, CodeNotFound, "namespace_not_found"},
	// Before lease_closed: a lease ended elsewhere matches both (the
	// library's ErrLeaseExpired), and the server answers 404 for it.
	{ErrLeaseNotFound, http.StatusNotFound, CodeNotFound, "lease_not_found"},
	{model.ErrLeaseNotFound, http.StatusNotFound, CodeNotFound, "lease_not_found"},
	{model.ErrKeyNotFound, http.StatusNotFound, CodeNotFound, "key_not_found"},
	{model.ErrNotFound, http.StatusNotFound, CodeNotFound, "not_found"},
	{model.ErrEntityExists, http.StatusConflict, CodeConflict, "entity_exists"},
	{model.ErrNamespaceExists, http.StatusConflict, CodeConflict, "namespace_exists"},
	{model.ErrKeyExists, http.StatusConflict, CodeConflict, "key_exists"},
	{model.ErrNamespaceDeleted, http.StatusConflict, CodeConflict, "namespace_deleted"},
	// Servers no longer answer lease_closed or too_many_leases (leases live
	// in the store); the rows stay so that clients read older servers.
	{model.ErrLeaseClosed, http.StatusConflict, CodeConflict, "lease_closed"},
	{model.ErrReservationConflict, http.StatusConflict, CodeConflict, "reservation_conflict"},
	{model.ErrIdempotencyConflict, http.StatusConflict, CodeConflict, "idempotency_key_reused"},
	{ErrConflict, http.StatusConflict, CodeConflict, "conflict"},
	{model.ErrPreconditionFailed, http.StatusPreconditionFailed, CodePreconditionFailed, ""},
	{ErrNoRoute, http.StatusNotFound, CodeNotFound, "no_route"},
	{ErrMethodNotAllowed, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method_not_allowed"},
	{model.ErrUsageUnsupported, http.StatusNotImplemented, CodeUnimplemented, "usage_unsupported"},
	{model.ErrCapacityUnsupported, http.StatusNotImplemented, CodeUnimplemented, "capacity_unsupported"},
	{ErrBackupUnsupported, http.StatusNotImplemented, CodeUnimplemented, "backup_unsupported"},
	{ErrTooManyLeases, http.StatusServiceUnavailable, CodeUnavailable, "too_many_leases"},
	{ErrUnauthenticated, http.StatusUnauthorized, CodeUnauthenticated, ""},
	{ErrPermissionDenied, http.StatusForbidden, CodePermissionDenied, ""},
}

// ErrorBody maps an error from the library (or this package's sentinels) to
// an HTTP status and error body. Unknown errors are internal: their text is
// not sent, as it may describe the store.
func ErrorBody(err error) (int, Error) {
	var rl *model.RateLimitExceeded
	var ve *model.ValidationError
	var pe *PermissionError
	var ended *model.LeaseEndedError
	switch {
	case errors.As(err, &rl):
		return http.StatusTooManyRequests, Error{Code: CodeRateLimited, Message: rl.Error(),
			RetryAfterMS: rl.RetryAfterMS(), Waits: rl.Waits(), Limits: FromStatuses(rl.Statuses)}
	case errors.As(err, &ve):
		return http.StatusBadRequest, Error{Code: CodeInvalidArgument, Message: ve.Error(), Field: ve.Field, Value: ve.Value, Reason: ve.Reason}
	case errors.As(err, &pe):
		return http.StatusForbidden, Error{Code: CodePermissionDenied, Message: pe.Error(), Field: pe.Field, Reason: pe.Reason}
	case errors.As(err, &ended):
		return http.StatusConflict, Error{Code: CodeConflict, Message: err.Error(), Reason: "lease_closed", Ended: ended.How}
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.status, Error{Code: k.code, Message: err.Error(), Reason: k.reason}
		}
	}
	if errors.Is(err, model.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return http.StatusServiceUnavailable, Error{Code: CodeUnavailable, Message: "the store did not answer"}
	}
	return http.StatusInternalServerError, Error{Code: CodeInternal, Message: "internal error"}
}

// AsError turns an error response back into the error the library would
// have returned: *model.RateLimitExceeded, *model.ValidationError,
// *model.UnavailableError, or an error matching the sentinel named by the
// body. Others are *StatusError.
func AsError(status int, e Error) error {
	switch e.Code {
	case CodeRateLimited:
		return &model.RateLimitExceeded{Statuses: ToStatuses(e.Limits), RetryAfter: model.DurationMS(e.RetryAfterMS)}
	case CodeInvalidArgument:
		return &model.ValidationError{Field: e.Field, Value: e.Value, Reason: e.Reason}
	case CodePermissionDenied:
		if e.Field != "" {
			return &PermissionError{Field: e.Field, Reason: e.Reason}
		}
	case CodeConflict:
		if e.Reason == "lease_closed" && e.Ended != "" {
			return &model.LeaseEndedError{How: e.Ended}
		}
	case CodeUnavailable:
		if e.Reason == "" {
			return &model.UnavailableError{Op: "server", Err: &StatusError{Status: status, Body: e}}
		}
	}
	for _, k := range kinds {
		if k.code == e.Code && k.reason == e.Reason {
			return &StatusError{Status: status, Body: e, sentinel: k.err}
		}
	}
	return &StatusError{Status: status, Body: e}
}

// StatusError is an error response that has no richer type. It matches
// (errors.Is) the sentinel its body names, if any.
type StatusError struct {
	Status   int
	Body     Error
	sentinel error
}

func (e *StatusError) Error() string {
	if e.Body.Message != "" {
		return e.Body.Message
	}
	return http.StatusText(e.Status)
}

// Unwrap returns the sentinel the body names, or nil.
func (e *StatusError) Unwrap() error { return e.sentinel }
