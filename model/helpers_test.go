package model_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/model"
)

// wantInvalid asserts that err is a *model.ValidationError matching
// model.ErrInvalid, whose Field is field (unless field is "*") and whose Reason
// contains reason. It returns the ValidationError for further checks.
func wantInvalid(t *testing.T, err error, field, reason string) *model.ValidationError {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want a *ValidationError (field %q, reason containing %q)", field, reason)
	}
	var ve *model.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *model.ValidationError", err, err)
	}
	if !errors.Is(err, model.ErrInvalid) {
		t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
	}
	if field != "*" && ve.Field != field {
		t.Errorf("Field = %q, want %q (error: %v)", ve.Field, field, err)
	}
	if !strings.Contains(ve.Reason, reason) {
		t.Errorf("Reason = %q, want it to contain %q", ve.Reason, reason)
	}
	return ve
}
