package bucket_test

import (
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/internal/cputime"
)

var (
	sinkState bucket.State
	sinkInt   int64
	sinkBool  bool
)

var benchCases = []struct {
	name string
	p    bucket.Params
	s    bucket.State
}{
	{"100PerMinute", perMinute100, bucket.State{Tokens: 12_345, Rem: 40_000}},
	{"Extreme", bucket.Params{Capacity: maxTok, Amount: maxTok - 1, Period: maxPer}, bucket.State{Tokens: -maxTok, Rem: maxPer - 1}},
}

func BenchmarkRefill(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			defer cputime.ReportPerOp(b, cputime.Process())
			s := bc.s
			for b.Loop() {
				s = bucket.Refill(s, bc.p, 1)
				if s.Tokens >= bc.p.Capacity {
					s = bc.s
				}
			}
			sinkState = s
		})
	}
}

func BenchmarkConsume(b *testing.B) {
	b.ReportAllocs()
	defer cputime.ReportPerOp(b, cputime.Process())
	s := bucket.State{Tokens: maxTok}
	var ok bool
	for b.Loop() {
		if s, ok = bucket.Consume(s, 1000); !ok {
			s.Tokens = maxTok
		}
	}
	sinkState, sinkBool = s, ok
}

func BenchmarkRetryAfter(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			defer cputime.ReportPerOp(b, cputime.Process())
			var w int64
			for b.Loop() {
				w += bucket.RetryAfter(bc.s, bc.p, bc.p.Capacity-w&1)
			}
			sinkInt = w
		})
	}
}
