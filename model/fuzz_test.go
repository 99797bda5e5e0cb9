package model_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/model"
)

func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{
		// valid
		"rpm:100", "tpm:10000:15000", "rps:50/sec", "rpm:100/5min",
		"tph:100000/hour:150000", "tpd:1/day", "x:5/250ms", "inflight:10/concurrent", "gpus:2/reserved",
		"r:1/106751day", "r:4611686018427387", "a.b-c_D9:10/2day:1",
		"tok:1000000/month@UTC", "d:3/day@Europe/Berlin", "w:1/week@America/Argentina/Buenos_Aires", "h:5/hour@Etc/GMT+5",
		// invalid
		"", "rpm", "rpm:", ":100", "1rpm:100", "rpm:abc", "rpm:-5", "rpm:0",
		"rpm:100/mins", "rpm:100/0min", "rpm:100/min:0", "rpm:100/min:x",
		"in:10/concurrent:5", "g:1/reserved:2", "rpm:99999999999999999999",
		"a" + strings.Repeat("b", 64) + ":100", "my rpm:100", "_rpm:100",
		"rpm:100/", "rpm:100:", "rpm:1/106752day", "x:1/35184372088832ms",
		"r\xff:1", strings.Repeat("9", 200),
		"t:1/month@", "t:1/month@Local", "t:1/month@UTC:5", "t:1/fortnight@UTC", "t:1/month", "t:1/month@" + strings.Repeat("A/", 100),
		"t:1/day@../zoneinfo/UTC", "t:1/day@utc",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := model.ParseLimit(s)
		if err != nil {
			var ve *model.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("ParseLimit(%q) error %v (%T) is not a *ValidationError", s, err, err)
			}
			if !errors.Is(err, model.ErrInvalid) {
				t.Fatalf("ParseLimit(%q) error %v does not match ErrInvalid", s, err)
			}
			if ve.Field == "" || ve.Reason == "" {
				t.Fatalf("ParseLimit(%q) error has empty Field or Reason: %+v", s, ve)
			}
			if len(ve.Value) > 83 {
				t.Fatalf("ParseLimit(%q) error Value is %d bytes (> 83): %q", s, len(ve.Value), ve.Value)
			}
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("ParseLimit(%q) = %+v, which does not validate: %v", s, l, err)
		}
		text := l.String()
		again, err := model.ParseLimit(text)
		if err != nil {
			t.Fatalf("ParseLimit(%q) = %+v; ParseLimit(String() = %q) error: %v", s, l, text, err)
		}
		if again != l {
			t.Fatalf("ParseLimit(%q) = %+v; round trip via %q = %+v", s, l, text, again)
		}
	})
}
