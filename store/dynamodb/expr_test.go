package dynamodb

import (
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestExprText checks the expressions expr builds: placeholders numbered
// in order of first use (a name used again keeps its own), past the
// shared constant ones too, and clauses joined as DynamoDB reads them.
func TestExprText(t *testing.T) {
	deref := func(s *string) string {
		if s == nil {
			return "<nil>"
		}
		return *s
	}
	for _, c := range []struct {
		name       string
		build      func(e *expr)
		update     string
		condition  string
		names      map[string]string
		values     int
		valueOf    string // a placeholder whose value is checked ...
		valueWants string // ... to be this number
	}{
		{
			name:   "empty",
			build:  func(e *expr) {},
			update: "<nil>", condition: "<nil>", names: map[string]string{},
		},
		{
			name: "warm acquire",
			build: func(e *expr) {
				e.where("%s = %v", "b_rps_cp", num(10))
				e.where("%s <= %v", "b_rps_ft", num(99))
				e.setN("b_rps_ft", 100)
				e.addN("b_rps_tc", 1)
				e.setN("rf", 7)
				e.where("%s >= %v", "ttl", num(5))
			},
			update:    "SET #n1 = :v2, #n3 = :v4 ADD #n2 :v3",
			condition: "#n0 = :v0 AND #n1 <= :v1 AND #n4 >= :v5",
			names:     map[string]string{"#n0": "b_rps_cp", "#n1": "b_rps_ft", "#n2": "b_rps_tc", "#n3": "rf", "#n4": "ttl"},
			values:    6, valueOf: ":v4", valueWants: "7",
		},
		{
			name: "no value, remove, a name in the format",
			build: func(e *expr) {
				e.where("attribute_exists(%s)", "PK", nil)
				e.where("(attribute_not_exists(%s) OR "+e.name("op")+" <> %v)", "op", str("x"))
				e.remove = append(e.remove, e.name("parent_id"))
				e.addN("ev", 2)
			},
			update:    "ADD #n3 :v1 REMOVE #n2",
			condition: "attribute_exists(#n0) AND (attribute_not_exists(#n1) OR #n1 <> :v0)",
			names:     map[string]string{"#n0": "PK", "#n1": "op", "#n2": "parent_id", "#n3": "ev"},
			values:    2, valueOf: ":v1", valueWants: "2",
		},
		{
			name: "past the shared placeholders",
			build: func(e *expr) {
				for i := range placeholderCache + 2 {
					e.setN("a"+strconv.Itoa(i), int64(i))
				}
			},
			values: placeholderCache + 2, valueOf: ":v65", valueWants: "65",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newExpr()
			c.build(e)
			if c.names != nil {
				if got := deref(e.update()); got != c.update {
					t.Errorf("update = %q, want %q", got, c.update)
				}
				if got := deref(e.condition()); got != c.condition {
					t.Errorf("condition = %q, want %q", got, c.condition)
				}
				if len(e.names) != len(c.names) {
					t.Errorf("names = %v, want %v", e.names, c.names)
				}
				for p, a := range c.names {
					if e.names[p] != a {
						t.Errorf("names[%s] = %q, want %q", p, e.names[p], a)
					}
				}
			} else if n := len(e.names); n != placeholderCache+2 || e.names["#n65"] != "a65" || e.names["#n64"] != "a64" {
				t.Errorf("names = %d, #n64 = %q, #n65 = %q", n, e.names["#n64"], e.names["#n65"])
			}
			if len(e.values) != c.values {
				t.Errorf("%d values, want %d", len(e.values), c.values)
			}
			if c.valueOf != "" {
				v, ok := e.values[c.valueOf].(*types.AttributeValueMemberN)
				if !ok || v.Value != c.valueWants {
					t.Errorf("values[%s] = %v, want %s", c.valueOf, e.values[c.valueOf], c.valueWants)
				}
			}
		})
	}
}
