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

// IfVersion and IfAbsent read back as the version expected (0: none
// stored), a negative one is refused naming if_version, and a mismatch
// matches ErrPreconditionFailed and ErrDomain and says both versions.
func TestIfVersion(t *testing.T) {
	for _, c := range []struct {
		opt  model.WriteOption
		want int64
	}{{model.IfVersion(3), 3}, {model.IfAbsent(), 0}} {
		s := model.WriteSettingsOf(c.opt)
		if s.Expect == nil || *s.Expect != c.want || s.Validate() != nil {
			t.Errorf("expects %v (%v), want %d", s.Expect, s.Validate(), c.want)
		}
	}
	if s := model.WriteSettingsOf(model.WithPrincipal("p")); s.Expect != nil {
		t.Errorf("without IfVersion: expects %d", *s.Expect)
	}
	s := model.WriteSettingsOf(model.IfVersion(-1))
	var ve *model.ValidationError
	if err := s.Validate(); !errors.As(err, &ve) || ve.Field != "if_version" {
		t.Errorf("IfVersion(-1): %v, want a ValidationError of if_version", err)
	}
	for _, c := range []struct {
		expected, have int64
		msg            string
	}{
		{3, 4, "precondition failed: expected version 3, it is at version 4"},
		{0, 2, "precondition failed: expected not to exist, it is at version 2"},
		{5, 0, "precondition failed: expected version 5, it does not exist"},
	} {
		err := model.VersionMismatch(c.expected, c.have)
		if !errors.Is(err, model.ErrPreconditionFailed) || !errors.Is(err, model.ErrDomain) || err.Error() != c.msg {
			t.Errorf("VersionMismatch(%d, %d) = %q, want %q matching ErrPreconditionFailed and ErrDomain", c.expected, c.have, err, c.msg)
		}
	}
}
