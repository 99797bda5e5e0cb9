package server

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// Reserving and releasing through HTTP show up in the entity's audit log
// with the principal of the API key (the principal header is ignored
// with keys), and a release made on an event with its event_* fields. A
// reserve of an id held already, and a release whose parameters are out
// of bounds, write nothing.
func TestReservationsAudited(t *testing.T) {
	keys, err := LoadKeys(strings.NewReader(HashKey("admin") + " * admin ops\n" + HashKey("a-acq") + " default acquire svc-a allow_limits\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, WithKeys(keys))
	e.hdr.Set("Authorization", "Bearer a-acq")
	e.hdr.Set(api.PrincipalHeader, "mallory")
	body := func(id string) map[string]any {
		return map[string]any{"entity": "team-a", "resource": "emr", "id": id, "limits": []string{"clusters:2/reserved"}}
	}
	e.want(http.StatusCreated, "POST", "/v1/reservations", body("j-1"), nil)
	e.want(http.StatusOK, "POST", "/v1/reservations", body("j-1"), nil) // held already: no event
	e.want(http.StatusCreated, "POST", "/v1/reservations", body("j-2"), nil)
	long := url.Values{api.EventRuleParam: {strings.Repeat("r", model.MaxTriggerFieldLen+1)}}
	var er api.Error
	e.want(http.StatusBadRequest, "DELETE", "/v1/reservations/j-1?"+long.Encode(), nil, &er)
	if er.Field != api.EventRuleParam {
		t.Errorf("an oversized event_rule: %+v, want field %s", er, api.EventRuleParam)
	}
	trigger := url.Values{api.EventRuleParam: {"emr-terminated"}, api.EventSourceParam: {"aws.emr"},
		api.EventDetailTypeParam: {"EMR Cluster State Change"}, api.EventIDParam: {"e-1"}}
	e.want(http.StatusNoContent, "DELETE", "/v1/reservations/j-1?"+trigger.Encode(), nil, nil)
	e.want(http.StatusNoContent, "DELETE", "/v1/reservations/j-2", nil, nil)

	e.hdr.Set("Authorization", "Bearer admin")
	var audit api.AuditResponse
	e.want(http.StatusOK, "GET", "/v1/audit?entity=team-a", nil, &audit)
	want := []struct{ action, id, how string }{
		{model.ActionReservationReserve, "j-1", ""},
		{model.ActionReservationReserve, "j-2", ""},
		{model.ActionReservationRelease, "j-1", "event"},
		{model.ActionReservationRelease, "j-2", "released"},
	}
	if len(audit.Events) != len(want) {
		t.Fatalf("audit of team-a = %+v, want %d events", audit.Events, len(want))
	}
	for i, w := range want {
		ev := audit.Events[i]
		if ev.Action != w.action || ev.Principal != "svc-a" || ev.Details["reservation"] != w.id || ev.Details["how"] != w.how {
			t.Errorf("event %d = %+v, want %s of %s by svc-a (how %q)", i, ev, w.action, w.id, w.how)
		}
	}
	if d := audit.Events[2].Details; d["rule"] != "emr-terminated" || d["source"] != "aws.emr" || d["detail_type"] != "EMR Cluster State Change" || d["event_id"] != "e-1" {
		t.Errorf("the release on an event has details %v, want its event_* fields", d)
	}
}
