package dynamodb

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// noNetwork is an HTTP transport that counts the requests it is asked to
// send and sends none.
type noNetwork struct{ n atomic.Int64 }

func (r *noNetwork) RoundTrip(*http.Request) (*http.Response, error) {
	r.n.Add(1)
	return nil, errors.New("no network in this test")
}

// An invalid option is a *model.ValidationError naming the option and the
// value; the Store reports it from every entry point before any request,
// and the option does not take effect.
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
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.option+"="+tt.value, func(t *testing.T) {
			net := &noNetwork{}
			cfg := localConfig(func(c *aws.Config) { c.HTTPClient = &http.Client{Transport: net} })
			s := New(cfg, "tollgate-options", []Option{tt.opt}, atLocal)
			err := s.Err()
			var ve *model.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, model.ErrInvalid) {
				t.Fatalf("Err() = %v, want a *model.ValidationError", err)
			}
			if !strings.Contains(ve.Field, tt.option) || ve.Value != tt.value || ve.Reason == "" {
				t.Errorf("error %+v: want the option %s, the value %q and a reason", ve, tt.option, tt.value)
			}
			if s.maxAttempts != DefaultMaxAttempts || s.maxShards != maxShards || s.writesPerSecond != 1000 ||
				s.known.limit != DefaultKnownBuckets || s.bucketTTL != DefaultBucketTTL.Milliseconds() {
				t.Errorf("the invalid option took effect: %+v", s)
			}
			for name, call := range map[string]func() error{
				"CheckTable":  func() error { return s.CheckTable(ctx) },
				"CreateTable": func() error { return s.CreateTable(ctx) },
				"DescribeTable": func() error {
					_, err := s.DescribeTable(ctx)
					return err
				},
				"Consume": func() error {
					_, err := s.Consume(ctx, "ns", consumeReq(1, rate100, 1_000, store.BucketKey{Entity: "e", Resource: "r"}))
					return err
				},
			} {
				if got := call(); got != err {
					t.Errorf("%s = %v, want the option's error", name, got)
				}
			}
			if n := net.n.Load(); n != 0 {
				t.Errorf("%d requests sent by a misconfigured Store", n)
			}
		})
	}

	t.Run("Connect", func(t *testing.T) {
		_, err := Connect(ctx, ConnectConfig{Table: "t", Region: "us-east-1", Endpoint: "http://127.0.0.1:1"}, WithMaxAttempts(0))
		var ve *model.ValidationError
		if !errors.As(err, &ve) || !strings.Contains(ve.Field, "WithMaxAttempts") {
			t.Errorf("Connect with WithMaxAttempts(0): %v, want a *model.ValidationError naming it", err)
		}
	})

	t.Run("table name", func(t *testing.T) {
		if err := New(localConfig(), "", nil).Err(); !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "table") {
			t.Errorf("New with an empty table name: Err() = %v, want a validation error naming the table", err)
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
		if err := New(localConfig(), "t", []Option{opt}).Err(); err != nil {
			t.Errorf("Err() = %v", err)
		}
	}
	s := New(localConfig(), "t", []Option{WithMaxAttempts(1), WithMaxShards(8)})
	if s.maxAttempts != 1 || s.maxShards != 8 {
		t.Errorf("maxAttempts %d, maxShards %d; want 1, 8", s.maxAttempts, s.maxShards)
	}
}
