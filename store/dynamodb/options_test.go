package dynamodb

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// An invalid option or table name is a *model.ValidationError naming it
// and the value, from New and Connect.
func TestInvalidOptions(t *testing.T) {
	tests := []struct {
		opt    Option
		option string
		value  string
	}{
		{WithMaxAttempts(0), "WithMaxAttempts", "0"},
		{WithMaxAttempts(-3), "WithMaxAttempts", "-3"},
		{WithWritePressureLimit(-1), "WithWritePressureLimit", "-1"},
		{WithMaxShards(1), "WithMaxShards", "1"},
		{WithMaxShards(0), "WithMaxShards", "0"},
		{WithMaxShards(48), "WithMaxShards", "48"},
		{WithMaxShards(128), "WithMaxShards", "128"},
		{WithKnownBuckets(0), "WithKnownBuckets", "0"},
		{WithBucketTTL(-time.Second), "WithBucketTTL", "-1s"},
	}
	for _, tt := range tests {
		t.Run(tt.option+"="+tt.value, func(t *testing.T) {
			s, err := New(localConfig(), "tollgate-options", []Option{WithMaxAttempts(2), tt.opt, WithSpeculative(false)}, atLocal)
			var ve *model.ValidationError
			if s != nil || !errors.As(err, &ve) || !errors.Is(err, model.ErrInvalid) {
				t.Fatalf("New = %v, %v; want no store and a *model.ValidationError", s, err)
			}
			if !strings.Contains(ve.Field, tt.option) || ve.Value != tt.value || ve.Reason == "" {
				t.Errorf("error %+v: want the option %s, the value %q and a reason", ve, tt.option, tt.value)
			}
		})
	}

	ctx := context.Background()
	t.Run("Connect", func(t *testing.T) {
		_, err := Connect(ctx, ConnectConfig{Table: "t", Region: "us-east-1", Endpoint: "http://127.0.0.1:1"}, WithMaxAttempts(0))
		var ve *model.ValidationError
		if !errors.As(err, &ve) || !strings.Contains(ve.Field, "WithMaxAttempts") {
			t.Errorf("Connect with WithMaxAttempts(0): %v, want a *model.ValidationError naming it", err)
		}
	})

	t.Run("table name", func(t *testing.T) {
		if _, err := New(localConfig(), "", nil); !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "table") {
			t.Errorf("New with an empty table name: %v, want a validation error naming the table", err)
		}
		if _, err := Connect(ctx, ConnectConfig{Region: "us-east-1"}); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("Connect without a table: %v, want a validation error", err)
		}
	})
}

// The edges of every option's range are accepted.
func TestValidOptions(t *testing.T) {
	for _, opt := range []Option{
		WithMaxAttempts(1), WithWritePressureLimit(0), WithMaxShards(2), WithMaxShards(64),
		WithKnownBuckets(1), WithBucketTTL(0), WithSpeculative(false), WithoutStreams(),
	} {
		if _, err := New(localConfig(), "t", []Option{opt}); err != nil {
			t.Errorf("New: %v", err)
		}
	}
	s := mustNew(t, localConfig(), "t", []Option{WithMaxAttempts(1), WithMaxShards(8)})
	if s.maxAttempts != 1 || s.eng().maxShards != 8 {
		t.Errorf("maxAttempts %d, maxShards %d; want 1, 8", s.maxAttempts, s.eng().maxShards)
	}
}
