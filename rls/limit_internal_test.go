package rls

import (
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tollgate-rl/tollgate"
)

func TestEnvoyLimit(t *testing.T) {
	const (
		sec    = pb.RateLimitResponse_RateLimit_SECOND
		minute = pb.RateLimitResponse_RateLimit_MINUTE
		hour   = pb.RateLimitResponse_RateLimit_HOUR
		day    = pb.RateLimitResponse_RateLimit_DAY
		unk    = pb.RateLimitResponse_RateLimit_UNKNOWN
	)
	cases := []struct {
		text string
		rpu  uint32
		unit pb.RateLimitResponse_RateLimit_Unit
		mult uint32 // 0: no multiplier (1)
	}{
		{"rps:10/sec", 10, sec, 0},
		{"rpm:600/min:100", 600, minute, 0},
		{"rpm:100/5min", 100, minute, 5},
		{"r:90/90sec", 90, sec, 90},
		{"tph:100000/hour:150000", 100000, hour, 0},
		{"rpd:5/day", 5, day, 0},
		{"rpw:5/7day", 5, day, 7},
		{"r:4/250ms", 16, sec, 0},
		{"r:1/1500ms", 2, sec, 3},
		{"r:3/7ms", 3000, sec, 7},
		{"r:4000000000/ms", 4294967295, sec, 0}, // saturates
		{"c:5/concurrent", 5, unk, 0},
		{"tok:1000000/month@UTC", 1000000, pb.RateLimitResponse_RateLimit_MONTH, 0},
		{"w:7/week@Europe/Berlin", 7, pb.RateLimitResponse_RateLimit_WEEK, 0},
		{"d:3/day@Europe/Berlin", 3, day, 0},
		{"h:60/hour@Asia/Kolkata", 60, hour, 0},
	}
	for _, c := range cases {
		l, err := tollgate.ParseLimit(c.text)
		if err != nil {
			t.Fatal(err)
		}
		got := envoyLimit(l)
		if got.Name != l.Name || got.RequestsPerUnit != c.rpu || got.Unit != c.unit || got.GetUnitMultiplier().GetValue() != c.mult {
			t.Errorf("%s: %v, want %d per %d %v", c.text, got, c.rpu, c.mult, c.unit)
		}
	}
}

func TestHashValue(t *testing.T) {
	if got := hashValue(""); got != "h-e3b0c44298fc1c149afbf4c8996fb924" {
		t.Errorf("hashValue(\"\") = %q", got)
	}
}
