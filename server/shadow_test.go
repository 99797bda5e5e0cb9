package server

import (
	"net/http"
	"slices"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
)

// A configuration stored with "shadow" reads back with it; an acquire its
// shadow limit cannot cover is granted, the limit's status exceeded and
// marked "shadow", and counted in tollgate_shadow_denied_total; a shadow
// list naming no limit of the configuration is a 400.
func TestShadowLimitsOverHTTP(t *testing.T) {
	e := newEnv(t)
	cfg := api.Limits{Limits: []string{"rpm:10/min", "tpm:100/min"}, Shadow: []string{"tpm"}}
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", cfg, nil)
	var got api.Limits
	e.want(http.StatusOK, "GET", "/v1/limits/resources/api", nil, &got)
	if !slices.Equal(got.Shadow, []string{"tpm"}) {
		t.Errorf("GET shadow = %v, want [tpm]", got.Shadow)
	}
	body := map[string]any{"entity": "key-1", "resource": "api", "consume": map[string]int64{"rpm": 1, "tpm": 150}}
	var acq api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", body, &acq)
	for _, s := range acq.Limits {
		switch s.Limit {
		case "tpm":
			if !s.Exceeded || !s.Shadow || s.Available != -50 {
				t.Errorf("tpm status %+v, want exceeded in shadow, -50 left", s)
			}
		case "rpm":
			if s.Exceeded || s.Shadow {
				t.Errorf("rpm status %+v, want neither exceeded nor in shadow", s)
			}
		}
	}
	name := `tollgate_shadow_denied_total{limit="tpm",namespace="default",resource="api"}`
	if got := e.metric(name); got != name+" 1" {
		t.Errorf("/metrics: %q, want %s 1", got, name)
	}
	e.want(http.StatusBadRequest, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:10/min"}, Shadow: []string{"tpm"}}, nil)
}
