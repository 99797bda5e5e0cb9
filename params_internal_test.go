package tollgate

import (
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
)

func TestParamsOf(t *testing.T) {
	tests := []struct {
		limit model.Limit
		want  bucket.Params
	}{
		{model.PerSecond("rps", 50), bucket.Params{Capacity: 50000, Amount: 50000, Period: 1000}},
		{model.PerMinute("rpm", 100), bucket.Params{Capacity: 100000, Amount: 100000, Period: 60000}},
		{model.PerHour("tph", 100000), bucket.Params{Capacity: 100000000, Amount: 100000000, Period: 3600000}},
		{model.PerDay("tpd", 1), bucket.Params{Capacity: 1000, Amount: 1000, Period: 86400000}},
		{model.RateLimit("x", 5, 250*time.Millisecond), bucket.Params{Capacity: 5000, Amount: 5000, Period: 250}},
		{model.ConcurrencyLimit("inflight", 10), bucket.Params{Capacity: 10000}},
		// A reserved limit is a concurrency limit to the buckets.
		{model.ReservedLimit("gpus", 2), bucket.Params{Capacity: 2000}},
		{model.PerMinute("tpm", 10000).WithBurst(15000), bucket.Params{Capacity: 15000000, Amount: 10000000, Period: 60000}},
		{model.PerSecond("r", 10).WithBurst(1), bucket.Params{Capacity: 1000, Amount: 10000, Period: 1000}},
		{model.PerMinute("r", model.MaxTokens), bucket.Params{Capacity: model.MaxTokens * 1000, Amount: model.MaxTokens * 1000, Period: 60000}},
	}
	for _, tt := range tests {
		t.Run(tt.limit.String(), func(t *testing.T) {
			if err := tt.limit.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			p := paramsOf(tt.limit)
			if p != tt.want {
				t.Errorf("paramsOf = %+v, want %+v", p, tt.want)
			}
			if err := p.Validate(); err != nil {
				t.Errorf("a valid limit's params are invalid: %v", err)
			}
		})
	}
}

// A hoisted WithLimits is prepared once per recycled state; another
// option's limits replace them.
func TestExplicitLimitsPreparedOncePerOption(t *testing.T) {
	d := &leaseData{}
	a, b := model.WithLimits(model.PerSecond("rps", 5)), model.WithLimits(model.PerMinute("rpm", 7), model.ConcurrencyLimit("c", 2))
	a(&d.opts)
	first := d.explicitLimits()
	d.resetOptions()
	a(&d.opts)
	if again := d.explicitLimits(); &again[0] != &first[0] || again[0].params.Capacity != 5000 {
		t.Fatalf("the same option was prepared again: %+v", again)
	}
	d.resetOptions()
	b(&d.opts)
	got := d.explicitLimits()
	if len(got) != 2 || got[0].limit.Name != "rpm" || got[1].params.Capacity != 2000 {
		t.Fatalf("another option's limits: %+v", got)
	}
}
