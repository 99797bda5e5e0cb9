package model_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/model"
)

// Write options read back as they were given; a later option wins.
func TestWriteSettingsOf(t *testing.T) {
	tr := model.EventTrigger{Rule: "r", Source: "s", DetailType: "d", EventID: "e"}
	got := model.WriteSettingsOf(model.WithPrincipal("a"), model.WithTrigger(tr), model.WithPrincipal("b"))
	if got.Principal != "b" || got.Trigger != tr {
		t.Errorf("WriteSettingsOf = %+v", got)
	}
	if (model.WriteSettingsOf() != model.WriteSettings{}) || !model.WriteSettingsOf().Trigger.IsZero() {
		t.Error("no options are not the zero settings")
	}
}

// Each field of a trigger is bounded, named as the HTTP API names it; a
// principal is bounded too.
func TestWriteSettingsValidate(t *testing.T) {
	long := strings.Repeat("x", model.MaxTriggerFieldLen+1)
	cases := map[string]model.WriteSettings{
		"principal":         {Principal: strings.Repeat("p", model.MaxPrincipalLen+1)},
		"event_rule":        {Trigger: model.EventTrigger{Rule: long}},
		"event_source":      {Trigger: model.EventTrigger{Source: long}},
		"event_detail_type": {Trigger: model.EventTrigger{DetailType: long}},
		"event_id":          {Trigger: model.EventTrigger{EventID: long}},
	}
	for field, s := range cases {
		var ve *model.ValidationError
		if err := s.Validate(); !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%s too long: %v, want a ValidationError on %s", field, err, field)
		}
	}
	ok := model.WriteSettings{Principal: "p", Trigger: model.EventTrigger{Rule: long[1:]}}
	if err := ok.Validate(); err != nil {
		t.Errorf("fields at their bounds: %v", err)
	}
}

// A trigger adds the fields it has to an event's details.
func TestTriggerAddDetails(t *testing.T) {
	d := map[string]string{"reservation": "j-1"}
	model.EventTrigger{Rule: "r", EventID: "e"}.AddDetails(d)
	if want := map[string]string{"reservation": "j-1", "rule": "r", "event_id": "e"}; !maps.Equal(d, want) {
		t.Errorf("details = %v, want %v", d, want)
	}
}

// WithAudit keeps a copy of its options: the caller's slice may change,
// and two acquires' settings built from one hoisted option never share
// what they append.
func TestWithAuditCopies(t *testing.T) {
	opts := []model.WriteOption{model.WithPrincipal("a")}
	audit := model.WithAudit(opts...)
	opts[0] = model.WithPrincipal("changed")
	s, err := model.SettingsOf(audit, model.WithAudit(model.WithPrincipal("b")))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Audit) != 2 || model.WriteSettingsOf(s.Audit[:1]...).Principal != "a" || model.WriteSettingsOf(s.Audit...).Principal != "b" {
		t.Errorf("settings' audit options = %d, principals %q then %q", len(s.Audit),
			model.WriteSettingsOf(s.Audit[:1]...).Principal, model.WriteSettingsOf(s.Audit...).Principal)
	}
	again, _ := model.SettingsOf(audit)
	if len(again.Audit) != 1 {
		t.Errorf("a second use of the option holds %d options, want 1", len(again.Audit))
	}
}
