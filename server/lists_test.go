package server

import (
	"net/http"
	"slices"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
)

// GET /v1/available takes its lists (limits, consume) once per value,
// comma-separated, or both, as the CLI takes lists; an empty item is a
// 400 as an empty parameter is.
func TestAvailableCommaLists(t *testing.T) {
	e := newEnv(t)
	const base = "/v1/available?entity=key-1&resource=api"
	for _, c := range []struct {
		name, query string
		status      int
		limits      []string // the limits answered, in order
		field       string   // a 400's
	}{
		{"repeated", "&limits=rpm:60&limits=inflight:5/concurrent", 200, []string{"rpm", "inflight"}, ""},
		{"comma-separated", "&limits=rpm:60,inflight:5/concurrent", 200, []string{"rpm", "inflight"}, ""},
		{"both", "&limits=rpm:60,inflight:5/concurrent&limits=d:3/day@Europe/Berlin", 200, []string{"rpm", "inflight", "d"}, ""},
		{"escaped comma", "&limits=rpm:60%2Ctpm:1000", 200, []string{"rpm", "tpm"}, ""},
		{"consume comma-separated", "&limits=rpm:60,tpm:1000&consume=rpm:1,tpm:500", 200, []string{"rpm", "tpm"}, ""},
		{"consume named twice across a comma", "&limits=rpm:60&consume=rpm:1,rpm:2", 400, nil, "consume.rpm"},
		{"empty item", "&limits=rpm:60,", 400, nil, "limit"},
		{"a duplicate across a comma", "&limits=rpm:60,rpm:10", 400, nil, "limits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.status != http.StatusOK {
				var er api.Error
				e.want(c.status, "GET", base+c.query, nil, &er)
				if er.Code != api.CodeInvalidArgument || er.Field == "" || er.Field[:min(len(c.field), len(er.Field))] != c.field {
					t.Errorf("400 %+v, want invalid_argument on %s...", er, c.field)
				}
				return
			}
			var av api.AvailableResponse
			e.want(c.status, "GET", base+c.query, nil, &av)
			var got []string
			for _, l := range av.Limits {
				got = append(got, l.Limit)
			}
			if !slices.Equal(got, c.limits) {
				t.Errorf("limits %v, want %v", got, c.limits)
			}
		})
	}
}
