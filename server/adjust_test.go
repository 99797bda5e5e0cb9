package server

import (
	"net/http"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
)

// An acquire-role key cannot wipe consumption with a negative adjustment:
// a lease's net consumption never goes below zero (400), and a rejected
// adjustment changes nothing.
func TestAdjustCannotRefundOthers(t *testing.T) {
	e := newEnv(t)
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:10/hour"}}, nil)
	spend := map[string]any{"entity": "key-1", "resource": "api", "consume": map[string]int64{"rpm": 10}, "commit": true}
	e.want(http.StatusOK, "POST", "/v1/acquire", spend, nil)
	var a api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", map[string]any{"entity": "key-1", "resource": "api", "consume": map[string]int64{"rpm": 0}}, &a)
	var er api.Error
	e.want(http.StatusBadRequest, "POST", "/v1/leases/"+a.LeaseID+"/adjust", api.AdjustRequest{Consume: map[string]int64{"rpm": -10}}, &er)
	if er.Code != api.CodeInvalidArgument || er.Field != "consume.rpm" || er.Value != "-10" || er.Reason == "" {
		t.Errorf("error %+v, want invalid_argument on consume.rpm, value -10, with a reason", er)
	}
	var lr api.LeaseResponse
	e.want(http.StatusOK, "POST", "/v1/leases/"+a.LeaseID+"/commit", nil, &lr)
	if lr.Consumed["rpm"] != 0 {
		t.Errorf("committed %v, want rpm 0", lr.Consumed)
	}
	var av api.AvailableResponse
	e.want(http.StatusOK, "GET", "/v1/available?entity=key-1&resource=api", nil, &av)
	if len(av.Limits) != 1 || av.Limits[0].Available != 0 {
		t.Errorf("available %+v, want rpm 0 of 10 (the hour stays spent)", av.Limits)
	}
}
