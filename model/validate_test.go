package model_test

import (
	"math/rand"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/model"
)

// The validators under test with their docs/semantics.md 9 definitions.
var identifiers = []struct {
	name     string
	validate func(string) error
	field    string
	re       *regexp.Regexp
	max      int
	first    string // valid first characters for generated strings
	rest     string // valid later characters
}{
	{"ValidateEntityID", model.ValidateEntityID, "entity",
		regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:@-]*$`), 256,
		"AZaz09mQ5", "AZaz09mQ5_.:@-"},
	{"ValidateResource", model.ValidateResource, "resource",
		regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_./-]*$`), 64,
		"AZazmQ", "AZaz09mQ5_./-"},
	{"ValidateLimitName", model.ValidateLimitName, "limit.name",
		regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]*$`), 64,
		"AZazmQ", "AZaz09mQ5_.-"},
	{"ValidateReservationID", model.ValidateReservationID, "reservation_id",
		regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:@/-]*$`), 256,
		"AZaz09mQ5", "AZaz09mQ5_.:@/-"},
}

func TestValidateIdentifiers(t *testing.T) {
	type tc struct {
		in     string
		ok     bool
		reason string
	}
	cases := map[string][]tc{
		"ValidateEntityID": {
			{"org-1", true, ""},
			{"a", true, ""},
			{"Z", true, ""},
			{"0", true, ""},
			{"9abc", true, ""},
			{"user@example.com", true, ""},
			{"key:prod_1.v-2", true, ""},
			{"a" + strings.Repeat("-", 255), true, ""},
			{strings.Repeat("x", 256), true, ""},
			{strings.Repeat("x", 257), false, "longer than 256 bytes"},
			{"", false, "must not be empty"},
			{"-org", false, "must start with a letter or digit"},
			{"_org", false, "must start with a letter or digit"},
			{".org", false, "must start with a letter or digit"},
			{":org", false, "must start with a letter or digit"},
			{"@org", false, "must start with a letter or digit"},
			{" org", false, "must start with a letter or digit"},
			{"org 1", false, `" " at byte 3`},
			{"org/1", false, `"/" at byte 3`},
			{"org#1", false, `"#" at byte 3`},
			{"org\n", false, `"\n" at byte 3`},
			{"org\x00", false, "at byte 3"},
			{"orgé", false, `"é" at byte 3`},
			{"éorg", false, "must start with a letter or digit"},
			{"org\xff", false, "at byte 3"},
			{"org[1]", false, `"[" at byte 3`},
			{"org`", false, "at byte 3"},
			{"org{", false, "at byte 3"},
		},
		"ValidateResource": {
			{"openai/gpt-4o", true, ""},
			{"gpt-4o", true, ""},
			{"a", true, ""},
			{"Z9_./-", true, ""},
			{"a" + strings.Repeat("/", 63), true, ""},
			{strings.Repeat("r", 64), true, ""},
			{strings.Repeat("r", 65), false, "longer than 64 bytes"},
			{"", false, "must not be empty"},
			{"4o", false, "must start with a letter"},
			{"_default_", false, "must start with a letter"},
			{"/gpt", false, "must start with a letter"},
			{"-gpt", false, "must start with a letter"},
			{"gpt 4o", false, `" " at byte 3`},
			{"gpt:4o", false, `":" at byte 3`},
			{"gpt@4o", false, `"@" at byte 3`},
			{"gpt\t", false, "at byte 3"},
			{"gpté", false, `"é" at byte 3`},
			{"\u00e9gpt", false, "must start with a letter"},
			{"gpt\xc3", false, "at byte 3"},
		},
		"ValidateLimitName": {
			{"rpm", true, ""},
			{"r", true, ""},
			{"Z9_.-", true, ""},
			{"tokens.per-minute_2", true, ""},
			{strings.Repeat("n", 64), true, ""},
			{strings.Repeat("n", 65), false, "longer than 64 bytes"},
			{"", false, "must not be empty"},
			{"_internal", false, "must start with a letter"},
			{"1rpm", false, "must start with a letter"},
			{".rpm", false, "must start with a letter"},
			{"rpm/min", false, `"/" at byte 3`},
			{"rpm:1", false, `":" at byte 3`},
			{"rpm@", false, `"@" at byte 3`},
			{"rp m", false, `" " at byte 2`},
			{"rpmé", false, `"é" at byte 3`},
			{"rpm\x80", false, "at byte 3"},
		},
		"ValidateReservationID": {
			{"j-2AXXXXXXGAPLF", true, ""}, // an EMR cluster id
			{"4c7b1d5e-8f2a-4e3b-9c6d-1a2b3c4d5e6f", true, ""},
			{"cluster/j-1:prod@us-east-1", true, ""}, // an ARN's resource part
			{"sandbox.team_a", true, ""},
			{"0", true, ""},
			{strings.Repeat("x", 256), true, ""},
			{strings.Repeat("x", 257), false, "longer than 256 bytes"},
			{"", false, "must not be empty"},
			{"-j", false, "must start with a letter or digit"},
			{"/j", false, "must start with a letter or digit"},
			{":j", false, "must start with a letter or digit"},
			{"j 1", false, `" " at byte 1`},
			{"j#1", false, `"#" at byte 1`},
			{"jé", false, `"é" at byte 1`},
		},
	}
	for _, id := range identifiers {
		t.Run(id.name, func(t *testing.T) {
			for _, c := range cases[id.name] {
				err := id.validate(c.in)
				if c.ok {
					if err != nil {
						t.Errorf("%s(%q) = %v, want nil", id.name, c.in, err)
					}
					continue
				}
				if err == nil {
					t.Errorf("%s(%q) = nil, want an error", id.name, c.in)
					continue
				}
				ve := wantInvalid(t, err, id.field, c.reason)
				want := c.in
				if len(want) > 80 {
					want = want[:80] + "..."
				}
				if ve.Value != want {
					t.Errorf("%s(%q): Value = %q, want %q", id.name, c.in, ve.Value, want)
				}
			}
		})
	}
}

// TestValidateIdentifiersMatchSpec compares each validator with the regular
// expression and length bound of docs/semantics.md 9 on random strings.
func TestValidateIdentifiersMatchSpec(t *testing.T) {
	// Boundary characters of every class, separators of every validator,
	// control characters and bytes of multi-byte UTF-8 sequences.
	const odd = "@[`{/:_.-" + " \x00\x1f\x7f\x80\xc3\xa9\xff" + "?^#~\\"
	rng := rand.New(rand.NewSource(1))
	for _, id := range identifiers {
		t.Run(id.name, func(t *testing.T) {
			lengths := []int{0, 1, 2, 3, 5, 8, id.max - 1, id.max, id.max + 1}
			var valid, invalid int
			for i := 0; i < 4000; i++ {
				n := lengths[rng.Intn(len(lengths))]
				oddRate := []float64{0, 0.01, 0.2, 0.7}[rng.Intn(4)]
				b := make([]byte, n)
				for j := range b {
					pool := id.rest
					if j == 0 {
						pool = id.first
					}
					if rng.Float64() < oddRate {
						pool = odd
					}
					b[j] = pool[rng.Intn(len(pool))]
				}
				s := string(b)
				want := len(s) <= id.max && id.re.MatchString(s)
				err := id.validate(s)
				if got := err == nil; got != want {
					t.Fatalf("%s(%q) = %v, but the spec says valid=%v", id.name, s, err, want)
				}
				if want {
					valid++
				} else {
					wantInvalid(t, err, id.field, "")
					invalid++
				}
			}
			// The generator must exercise both outcomes.
			if valid < 500 || invalid < 500 {
				t.Errorf("generated %d valid and %d invalid strings; want at least 500 of each", valid, invalid)
			}
		})
	}
}

func TestValidateIdentifiersDoNotAllocate(t *testing.T) {
	inputs := map[string][]string{
		"ValidateEntityID":  {"org-1", "user@example.com", strings.Repeat("x", 256)},
		"ValidateResource":  {"openai/gpt-4o", strings.Repeat("r", 64)},
		"ValidateLimitName": {"rpm", "tokens.per-minute_2", strings.Repeat("n", 64)},
	}
	for _, id := range identifiers {
		for _, in := range inputs[id.name] {
			var err error
			allocs := testing.AllocsPerRun(100, func() { err = id.validate(in) })
			if err != nil {
				t.Fatalf("%s(%q) = %v", id.name, in, err)
			}
			if allocs != 0 {
				t.Errorf("%s(%q) allocates %v times per call, want 0", id.name, in, allocs)
			}
		}
	}
}
