package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"
)

type inner struct {
	Limit string `json:"limit"`
	N     int8   `json:"n,omitempty"`
}

type Embedded struct {
	Until  int64    `json:"until_ms,omitempty"`
	Limits []string `json:"limits"`
	Shadow string   `json:"entity"` // hidden by doc.Entity, which is shallower
}

type left struct{ Twin string }
type right struct{ Twin string }

// doc exercises every rule: names from tags and fields, "-", embedded
// structs (promoted, shadowed, ambiguous), pointers, maps, slices, arrays,
// sized numbers and types that decode themselves.
type doc struct {
	Entity   string             `json:"entity"`
	Consume  map[string]int64   `json:"consume,omitempty"`
	Patch    *string            `json:"patch,omitempty"`
	Meta     *map[string]string `json:"metadata,omitempty"`
	Inner    inner              `json:"inner"`
	List     []inner            `json:"list"`
	Pair     [2]uint8           `json:"pair"`
	Bytes    []byte             `json:"bytes"`
	Small    uint16             `json:"small"`
	Ratio    float32            `json:"ratio"`
	Flag     bool               `json:"flag"`
	Quoted   int                `json:"quoted,string"`
	When     time.Time          `json:"when"`
	Raw      json.RawMessage    `json:"raw"`
	Any      any                `json:"any"`
	Num      json.Number        `json:"num"`
	Untagged string
	Ignored  string `json:"-"`
	//lint:ignore SA5008 the "-," tag names a member "-", as encoding/json reads it: what the test checks
	Dash string `json:"-,"`
	//lint:ignore U1000 unexported: not a member, which the test checks
	hidden string
	Embedded
	left
	right
}

func TestUnmarshal(t *testing.T) {
	cases := []struct {
		name, body string
		field      string // of the *Error; "-" when the error is no *Error
		ok         bool
	}{
		{name: "every kind", ok: true, body: `{"entity":"k","consume":{"a":1,"b":-2},"patch":"p","metadata":{"x":"y"},
			"inner":{"limit":"rpm","n":-128},"list":[{"limit":"a"},{"limit":"b"}],"pair":[1,255],"bytes":"aGk=","small":65535,
			"ratio":1.5e3,"flag":true,"quoted":"12","when":"2026-01-02T03:04:05Z","raw":{"k":[1,"x"]},"any":[{"a":1}],
			"num":1e400,"Untagged":"u","-":"d","until_ms":5,"limits":["x"]}`},
		{name: "empty object", body: ` {} `, ok: true},
		{name: "escaped name is the name", body: `{"entit\u0079":"k"}`, ok: true},

		{name: "null at the top", body: `null`, field: ""},
		{name: "null field", body: `{"entity":null}`, field: "entity"},
		{name: "null in a map", body: `{"consume":{"q":null}}`, field: "consume.q"},
		{name: "null pointer field", body: `{"patch":null}`, field: "patch"},
		{name: "null in a slice", body: `{"limits":["a",null]}`, field: "limits[1]"},
		{name: "null in a struct in a slice", body: `{"list":[{"limit":null}]}`, field: "list[0].limit"},
		{name: "null in raw JSON", body: `{"raw":{"a":[null]}}`, field: "raw.a[0]"},
		{name: "null in any", body: `{"any":{"a":null}}`, field: "any.a"},
		{name: "null for a self-decoding type", body: `{"when":null}`, field: "when"},
		{name: "null in a string field", body: `{"quoted":null}`, field: "quoted"},

		{name: "duplicate field", body: `{"entity":"a","entity":"b"}`, field: "entity"},
		{name: "duplicate through an escape", body: `{"entity":"a","\u0065ntity":"b"}`, field: "entity"},
		{name: "duplicate map key", body: `{"consume":{"a":1,"a":2}}`, field: "consume.a"},
		{name: "duplicate in metadata", body: `{"metadata":{"team":"a","team":"b"}}`, field: "metadata.team"},
		{name: "duplicate in raw JSON", body: `{"raw":{"k":1,"k":1}}`, field: "raw.k"},
		{name: "duplicate in a nested struct", body: `{"inner":{"limit":"a","limit":"a"}}`, field: "inner.limit"},

		{name: "wrong case", body: `{"ENTITY":"k"}`, field: "ENTITY"},
		{name: "wrong case nested", body: `{"inner":{"Limit":"k"}}`, field: "inner.Limit"},
		{name: "wrong case of a field name", body: `{"untagged":"u"}`, field: "untagged"},
		{name: "unknown", body: `{"nope":1}`, field: "nope"},
		{name: "the field name under a tag", body: `{"Entity":"k"}`, field: "Entity"},
		{name: "ignored field", body: `{"Ignored":"k"}`, field: "Ignored"},
		{name: "unexported field", body: `{"hidden":"k"}`, field: "hidden"},
		{name: "ambiguous embedded fields", body: `{"Twin":"k"}`, field: "Twin"},
		{name: "embedded struct by its name", body: `{"Embedded":{}}`, field: "Embedded"},

		{name: "string for int", body: `{"consume":{"a":"1"}}`, field: "consume.a"},
		{name: "fraction for int", body: `{"consume":{"a":1.0}}`, field: "consume.a"},
		{name: "exponent for int", body: `{"consume":{"a":1e3}}`, field: "consume.a"},
		{name: "int64 overflow", body: `{"consume":{"a":9223372036854775808}}`, field: "consume.a"},
		{name: "int8 overflow", body: `{"inner":{"n":128}}`, field: "inner.n"},
		{name: "negative uint", body: `{"small":-1}`, field: "small"},
		{name: "uint16 overflow", body: `{"small":65536}`, field: "small"},
		{name: "float32 overflow", body: `{"ratio":1e39}`, field: "ratio"},
		{name: "number for bool", body: `{"flag":1}`, field: "flag"},
		{name: "array for map", body: `{"consume":[]}`, field: "consume"},
		{name: "object for slice", body: `{"limits":{}}`, field: "limits"},
		{name: "number for string", body: `{"limits":[1]}`, field: "limits[0]"},
		{name: "string for array", body: `{"pair":"ab"}`, field: "pair"},
		{name: "array at the top", body: `[]`, field: ""},

		{name: "trailing object", body: `{} {}`, field: ""},
		{name: "trailing garbage", body: `{"entity":"k"} x`, field: ""},
		{name: "malformed", body: `{"entity":"k",}`, field: "-"},
		{name: "truncated", body: `{"entity":`, field: "-"},
		{name: "empty", body: "  \n", field: "-"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var v doc
			err := Unmarshal([]byte(c.body), &v)
			var se *Error
			switch {
			case c.ok && err != nil:
				t.Fatalf("Unmarshal: %v", err)
			case c.ok:
				var want doc
				if err := json.Unmarshal([]byte(c.body), &want); err != nil {
					t.Fatalf("encoding/json refuses it: %v", err)
				}
				if !reflect.DeepEqual(v, want) {
					t.Fatalf("decoded %+v, encoding/json %+v", v, want)
				}
			case err == nil:
				t.Fatal("accepted")
			case c.field == "-":
				if errors.As(err, &se) {
					t.Fatalf("%v: want a syntax error or EOF", err)
				}
			case !errors.As(err, &se):
				t.Fatalf("%v (%T): want an *Error", err, err)
			case se.Field != c.field:
				t.Fatalf("%v: field %q, want %q", err, se.Field, c.field)
			}
		})
	}
}

// The errors of malformed documents are those of encoding/json's Decoder.
func TestUnmarshalSyntaxErrors(t *testing.T) {
	var v doc
	if err := Unmarshal(nil, &v); err != io.EOF {
		t.Errorf("empty: %v, want io.EOF", err)
	}
	if err := Unmarshal([]byte(`{"a":[`), &v); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated: %v, want io.ErrUnexpectedEOF", err)
	}
	var syntax *json.SyntaxError
	if err := Unmarshal([]byte(`{"entity":nul}`), &v); !errors.As(err, &syntax) || syntax.Offset != 14 {
		t.Errorf("malformed: %v, want a *json.SyntaxError at 14", err)
	}
	// Malformed beats every other fault, wherever it is.
	if err := Unmarshal([]byte(`{"ENTITY":null,"x":1,}`), &v); !errors.As(err, &syntax) {
		t.Errorf("malformed after faults: %v, want a *json.SyntaxError", err)
	}
	var inv *json.InvalidUnmarshalError
	if err := Unmarshal([]byte(`{}`), v); !errors.As(err, &inv) {
		t.Errorf("not a pointer: %v, want *json.InvalidUnmarshalError", err)
	}
}

// The reason of a wrong-case name points to the right one.
func TestUnmarshalCaseHint(t *testing.T) {
	var v doc
	err := Unmarshal([]byte(`{"Metadata":{}}`), &v)
	want := `json: Metadata: unknown field (names are case-sensitive: "metadata")`
	if err == nil || err.Error() != want {
		t.Fatalf("%v, want %s", err, want)
	}
}

// FuzzUnmarshal holds Unmarshal to encoding/json: what it accepts,
// encoding/json accepts too (strictly, unknown fields disallowed) and
// decodes the same; what encoding/json refuses, it refuses.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"entity":"k","consume":{"a":1}}`, `{"consume":{"q":null}}`, `{"entity":"a","entity":"b"}`, `{"ENTITY":"k"}`,
		`{"list":[{"limit":"a","n":1}],"pair":[1,2],"small":7,"ratio":0.5,"when":"2026-01-02T03:04:05Z"}`,
		`{"raw":{"k":[1,{"x":true}]},"any":"s","num":-1.5e-3,"quoted":"-3","bytes":"aGk="}`, `{"until_ms":1,"limits":[]}`,
		`{"metadata":{"a":"b"},"patch":"x","Untagged":"u","-":"d"}`, `{} {}`, `[`, `"x"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var got doc
		err := Unmarshal([]byte(body), &got)
		var want doc
		dec := json.NewDecoder(bytes.NewReader([]byte(body)))
		dec.DisallowUnknownFields()
		ref := dec.Decode(&want)
		if ref == nil {
			if _, tail := dec.Token(); tail != io.EOF {
				ref = errors.New("trailing data")
			}
		}
		switch {
		case err == nil && ref != nil:
			t.Fatalf("accepted %q, which encoding/json refuses: %v", body, ref)
		case err == nil && !reflect.DeepEqual(got, want):
			t.Fatalf("%q: decoded %+v, encoding/json %+v", body, got, want)
		}
	})
}
