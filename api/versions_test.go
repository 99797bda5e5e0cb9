package api

import (
	"errors"
	"testing"

	"github.com/tollgate-rl/tollgate/model"
)

func TestPrecondition(t *testing.T) {
	for _, c := range []struct {
		ifMatch, ifNoneMatch string
		want                 *int64 // the version expected; nil: none
		field                string // the header refused, if any
	}{
		{"", "", nil, ""},
		{"*", "", nil, ""},
		{` "3" `, "", ptr(3), ""},
		{`"9223372036854775807"`, "", ptr(9223372036854775807), ""},
		{"", "*", ptr(0), ""},
		{`"0"`, "", nil, IfMatchHeader},
		{`"03"`, "", nil, IfMatchHeader},
		{`"-1"`, "", nil, IfMatchHeader},
		{`W/"3"`, "", nil, IfMatchHeader},
		{`"3", "4"`, "", nil, IfMatchHeader},
		{`3`, "", nil, IfMatchHeader},
		{`""`, "", nil, IfMatchHeader},
		{`"9223372036854775808"`, "", nil, IfMatchHeader},
		{"", `"3"`, nil, IfNoneMatchHeader},
		{`"3"`, "*", nil, IfNoneMatchHeader},
	} {
		opts, err := Precondition(c.ifMatch, c.ifNoneMatch)
		var ve *model.ValidationError
		switch {
		case c.field != "":
			if !errors.As(err, &ve) || ve.Field != c.field {
				t.Errorf("If-Match %q If-None-Match %q: %v, want a ValidationError of %s", c.ifMatch, c.ifNoneMatch, err, c.field)
			}
			continue
		case err != nil:
			t.Errorf("If-Match %q If-None-Match %q: %v", c.ifMatch, c.ifNoneMatch, err)
			continue
		}
		got := model.WriteSettingsOf(opts...).Expect
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("If-Match %q If-None-Match %q: expects %v, want %v", c.ifMatch, c.ifNoneMatch, got, c.want)
		}
		// What the client sends for it reads back the same.
		name, value := PreconditionHeaders(opts...)
		var back []model.WriteOption
		switch name {
		case IfMatchHeader:
			back, err = Precondition(value, "")
		case IfNoneMatchHeader:
			back, err = Precondition("", value)
		}
		if again := model.WriteSettingsOf(back...).Expect; err != nil || (again == nil) != (got == nil) || again != nil && *again != *got {
			t.Errorf("If-Match %q: headers %s: %s read back as %v, %v", c.ifMatch, name, value, again, err)
		}
	}
}

func ptr(v int64) *int64 { return &v }

// Whatever the headers hold, Precondition answers options or a
// ValidationError naming one of them, and never panics.
func FuzzPrecondition(f *testing.F) {
	for _, s := range []string{"", "*", `"1"`, `W/"1"`, `"1", "2"`, `"`, `""`} {
		f.Add(s, "")
		f.Add("", s)
	}
	f.Fuzz(func(t *testing.T, ifMatch, ifNoneMatch string) {
		opts, err := Precondition(ifMatch, ifNoneMatch)
		var ve *model.ValidationError
		if err != nil {
			if !errors.As(err, &ve) || ve.Field != IfMatchHeader && ve.Field != IfNoneMatchHeader {
				t.Fatalf("%q %q: %v", ifMatch, ifNoneMatch, err)
			}
			return
		}
		if e := model.WriteSettingsOf(opts...).Expect; e != nil && *e < 0 {
			t.Fatalf("%q %q: a negative version %d", ifMatch, ifNoneMatch, *e)
		}
	})
}
