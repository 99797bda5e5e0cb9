package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/api"
)

// acquireBodies are request bodies for the parser's tests and fuzzing:
// the shapes clients send, and the JSON it must decline or get right.
var acquireBodies = []string{
	`{"entity":"bench-0","resource":"bench","consume":{"rps":1},"limits":["rps:1000000000/sec"],"commit":true}`,
	`{"entity":"key-1","resource":"openai/gpt-4o","consume":{"rpm":1,"tpm":500}}`,
	` { "entity" : "k" , "resource":"r", "consume" : { "a" : 0 , "b":-5 } , "limits" : [ ] , "commit" : false } ` + "\n",
	`{"entity":"k","consume":{},"lease_ttl_ms":86400000,"on_unavailable":"allow"}`,
	`{"entity":"k","resource":"r","consume":{"rpm":1},"limits":["rpm:60","inflight:5/concurrent"]}`,
	`{}`, `{"entity":"ключ","resource":"日本"}`, `{"entity":"a<b>&c"}`, `{"consume":{"a":123456789012345678,"b":-99}}`,
	// Declined: encoding/json decides these.
	`{"entity":"a\"b"}`, `{"entity":"a\u0041"}`, `{"Entity":"k"}`, `{"entity":"k","entity":"j"}`,
	`{"consume":{"a":1,"a":2}}`, `{"consume":{"a":1.0}}`, `{"consume":{"a":1e3}}`, `{"consume":{"a":-0}}`,
	`{"consume":{"a":01}}`, `{"consume":{"a":9223372036854775807}}`, `{"consume":{"a":1234567890123456789}}`,
	`{"consume":null}`, `{"limits":null}`, `{"entity":null}`, `{"commit":null}`, `{"commit":"true"}`,
	`{"commit":truex}`, `{"entity":"k",}`, `{"entity":"k"}{}`, `{"entity":"k"} x`, "\ufeff{}", `{"x":1}`,
	"{\"entity\":\"a\tb\"}", "{\"entity\":\"\xff\"}", "{\"entity\":\"\xed\xa0\x80\"}", `{"lease_ttl_ms":-}`,
	`{"limits":["a",]}`, `{"limits":[1]}`, `{"consume":{"a":1,}}`, `{"consume":{a:1}}`, `[]`, ``, `{`, `"x"`,
}

// probeBodies are the bodies of probes made as a hostile tenant, which
// encoding/json alone accepted: a null taken as 0, the last of duplicate
// keys winning, a name matched without regard to case, an amount that
// saturated a bucket once adjusted twice.
var probeBodies = []string{
	`{"entity":"k","resource":"api","consume":{"q":null}}`,
	`{"entity":"k","entity":"j","resource":"api","consume":{"rpm":1}}`,
	`{"entity":"k","resource":"api","consume":{"rpm":1,"rpm":1000}}`,
	`{"ENTITY":"k","resource":"api","consume":{"rpm":1}}`,
	`{"entity":"k","resource":"api","consume":{"tpm":4600000000000000}}`,
	`{"entity":"k","resource":"api","consume":{"rpm":1},"limits":["rpm:5/min"],"limits":["rpm:5000/min"]}`,
	`{"entity":"k","resource":"api","consume":{"rpm":1},"on_unavailable":null}`,
}

// FuzzAcquireRequestJSON holds the fast parser and the strict decoder to
// each other, and the strict decoder to a reference (agree).
func FuzzAcquireRequestJSON(f *testing.F) {
	for _, b := range append(slices.Clone(acquireBodies), probeBodies...) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		agree(t, body)
	})
}

// agree checks, for one body:
//   - that what the fast parser accepts, decode accepts, into the same
//     request;
//   - that decodeAcquire (the fast parser, else decode) answers as decode
//     does: the same request, or the same error (status and field);
//   - that decode accepts exactly what encoding/json accepts (leniently,
//     as decode did before it was strict) and referenceStrict finds
//     strict.
func agree(t *testing.T, body string) {
	t.Helper()
	parsesAsDecodes(t, body)
	var got, want api.AcquireRequest
	gotErr := decodeAcquire(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/acquire", strings.NewReader(body)), &got)
	wantErr := decode(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/acquire", strings.NewReader(body)), &want)
	if !reflect.DeepEqual(gotErr, wantErr) {
		t.Fatalf("%q: decodeAcquire: %v, decode: %v", body, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decodeAcquire reads %#v, decode %#v", body, got, want)
	}
	if wantErr != nil {
		if status, _ := api.ErrorBody(wantErr); status != http.StatusBadRequest {
			t.Fatalf("%q: decode: %v, a %d", body, wantErr, status)
		}
	}
	var lenient api.AcquireRequest
	lenientOK := lenientDecode(body, &lenient) == nil
	strict := lenientOK && referenceStrict(body, acquireFields)
	switch {
	case wantErr == nil && !strict:
		t.Fatalf("%q: decode accepts it: encoding/json %v, strict by the reference %v", body, lenientOK, strict)
	case wantErr != nil && strict:
		t.Fatalf("%q: decode refuses it (%v), which is strict and encoding/json reads", body, wantErr)
	case wantErr == nil && !reflect.DeepEqual(want, lenient):
		t.Fatalf("%q: decode reads %#v, encoding/json %#v", body, want, lenient)
	}
}

// parsesAsDecodes checks that a body the fast parser accepts is one
// decode accepts too, with the same result.
func parsesAsDecodes(t *testing.T, body string) {
	t.Helper()
	var fast api.AcquireRequest
	if !parseAcquireRequest([]byte(body), &fast) {
		return
	}
	var want api.AcquireRequest
	r := httptest.NewRequest("POST", "/v1/acquire", strings.NewReader(body))
	if err := decode(httptest.NewRecorder(), r, &want); err != nil {
		t.Fatalf("parsed %q, which decode refuses: %v", body, err)
	}
	if !reflect.DeepEqual(fast, want) {
		t.Fatalf("%q: parsed %#v, decode reads %#v", body, fast, want)
	}
}

// acquireFields are the members of an acquire body.
var acquireFields = []string{"entity", "resource", "consume", "limits", "commit", "lease_ttl_ms", "on_unavailable"}

// lenientDecode is decode as it was before it was strict: encoding/json
// with unknown fields disallowed, one value.
func lenientDecode(body string, v any) error {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data")
	}
	return nil
}

// referenceStrict reports whether a well-formed body is strict, by a walk
// of its tokens that shares no code with strictjson: no null anywhere, no
// object with a key twice, and the top-level members among names, exactly.
func referenceStrict(body string, names []string) bool {
	dec := json.NewDecoder(strings.NewReader(body))
	var walk func(depth int) bool
	walk = func(depth int) bool {
		tok, err := dec.Token()
		if err != nil || tok == nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				key, _ := k.(string)
				if err != nil || seen[key] || (depth == 0 && !slices.Contains(names, key)) {
					return false
				}
				seen[key] = true
				if !walk(depth + 1) {
					return false
				}
			}
			_, err = dec.Token()
			return err == nil
		case json.Delim('['):
			for dec.More() {
				if !walk(depth + 1) {
					return false
				}
			}
			_, err = dec.Token()
			return err == nil
		}
		return true
	}
	return walk(0)
}

// FuzzAcquireRequestJSONParts is FuzzAcquireRequestJSON on bodies of the
// shape the parser accepts, with fuzzed text spliced in raw (quotes,
// escapes, control bytes, invalid UTF-8, digits) and fuzzed whitespace.
func FuzzAcquireRequestJSONParts(f *testing.F) {
	f.Add("key-1", "api", "rpm", "1", "rpm:60/min", "true", " ")
	f.Add("ключ", "a\\u0041", "a\"b", "-0", "x\u2028", "false", "\n\t")
	f.Add("k", "r", "n", "9223372036854775807", "", "null", "")
	f.Add("k", `r","ENTITY":"j`, `q":null,"r`, "1", `x"],"limits":["y`, "true", " ")
	f.Add("k", `r","entity":"j`, `rpm":1,"rpm`, "4600000000000000", "", "false", "")
	f.Fuzz(func(t *testing.T, entity, resource, name, amount, limit, commit, ws string) {
		body := ws + `{"entity":"` + entity + `",` + ws + `"resource":"` + resource + `","consume":{"` + name + `":` + amount +
			ws + `},"limits":["` + limit + `"` + ws + `],"commit":` + commit + `}` + ws
		agree(t, body)
	})
}

// The parser takes the common shapes and declines what it cannot be sure
// of; either way decodeAcquire answers as decode does.
func TestParseAcquireRequest(t *testing.T) {
	accepted := map[string]bool{}
	for _, b := range acquireBodies[:9] {
		accepted[b] = true
	}
	for _, body := range acquireBodies {
		var req api.AcquireRequest
		if got := parseAcquireRequest([]byte(body), &req); got != accepted[body] {
			t.Errorf("parseAcquireRequest(%q) = %v, want %v", body, got, accepted[body])
		}
	}
}

// decodeAcquire answers every body, whole or not, as decode does: the
// same request, or the same error.
func TestDecodeAcquireAsDecode(t *testing.T) {
	timeout := errors.New("i/o timeout")
	big := `{"entity":"` + strings.Repeat("k", maxFastBody) + `"}`
	cases := []struct {
		name   string
		body   string
		length int64 // declared; 0 for len(body)
		err    error // after body, instead of io.EOF
	}{
		{name: "common", body: acquireBodies[0]},
		{name: "declined", body: `{"entity":"a\"b","consume":{"x":1}}`},
		{name: "unknown field", body: `{"entity":"k","nope":1}`},
		{name: "wrong type", body: `{"entity":"k","consume":{"x":"1"}}`},
		{name: "trailing data", body: `{"entity":"k"} {}`},
		{name: "malformed", body: `{"entity":"k",}`},
		{name: "larger than the fast path", body: big},
		{name: "larger than declared", body: acquireBodies[1], length: 10},
		{name: "cut short", body: `{"entity":"k","consume":`, length: 100, err: io.ErrUnexpectedEOF},
		{name: "timed out", body: `{"entity":"k",`, length: 100, err: timeout},
		{name: "timed out after the object", body: `{"entity":"k"}`, length: 100, err: timeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			request := func() *http.Request {
				r := httptest.NewRequest("POST", "/v1/acquire", nil)
				var rd io.Reader = strings.NewReader(c.body)
				if c.err != nil {
					rd = io.MultiReader(rd, errReader{c.err})
				}
				r.Body = io.NopCloser(rd)
				r.ContentLength = c.length
				if c.length == 0 {
					r.ContentLength = int64(len(c.body))
				}
				return r
			}
			var got, want api.AcquireRequest
			gotErr := decodeAcquire(httptest.NewRecorder(), request(), &got)
			wantErr := decode(httptest.NewRecorder(), request(), &want)
			if !reflect.DeepEqual(gotErr, wantErr) {
				t.Fatalf("error %v, decode's %v", gotErr, wantErr)
			}
			if wantErr == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("read %#v, decode reads %#v", got, want)
			}
		})
	}
}

// FuzzAcquireResponseJSON holds appendAcquireResponse to json.Encoder.
func FuzzAcquireResponseJSON(f *testing.F) {
	f.Add("", "key-1", "api", "rpm", "rate", int64(60), int64(59), int64(1), false, int64(0), "rpm", int64(1), "tpm", int64(500), false, int64(0), uint8(1))
	f.Add("66e1cac2a00f5d0e1528d6e9ea5bd39f", "ключ", "a<b>&c", "x\"y\\z", "concurrency", int64(-1), int64(-9223372036854775808),
		int64(9223372036854775807), true, int64(16144), "b\u2028", int64(-3), "a\x00\xff", int64(0), true, int64(1795319447366), uint8(3))
	f.Add("", "", "", "", "", int64(0), int64(0), int64(0), false, int64(0), "", int64(0), "", int64(0), false, int64(0), uint8(4))
	f.Fuzz(func(t *testing.T, leaseID, entity, resource, limit, kind string, capacity, available, requested int64,
		exceeded bool, retryAfter int64, k1 string, n1 int64, k2 string, n2 int64, degraded bool, expires int64, shape uint8) {
		resp := api.AcquireResponse{LeaseID: leaseID, Consumed: map[string]int64{k1: n1, k2: n2}, Degraded: degraded, ExpiresMS: expires}
		st := api.LimitStatus{Entity: entity, Resource: resource, Limit: limit, Kind: kind, Capacity: capacity,
			Available: available, Requested: requested, Exceeded: exceeded, RetryAfterMS: retryAfter}
		switch shape % 4 { // 0: limits null
		case 1:
			resp.Limits = []api.LimitStatus{}
		case 2:
			resp.Limits = []api.LimitStatus{st}
		case 3:
			other := st
			other.Entity, other.Limit = other.Limit, other.Entity
			resp.Limits = []api.LimitStatus{st, other, st}
		}
		if shape&4 != 0 {
			resp.Consumed = nil
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(resp); err != nil {
			t.Fatal(err)
		}
		if got := appendAcquireResponse(nil, &resp); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("wrote\n%s\njson.Encoder writes\n%s", got, want.Bytes())
		}
	})
}

// writeAcquireResponse answers as writeJSON does: status, headers, body.
func TestWriteAcquireResponseAsWriteJSON(t *testing.T) {
	resp := api.AcquireResponse{LeaseID: "l", Consumed: map[string]int64{"b": 2, "a": 1},
		Limits: []api.LimitStatus{{Entity: "k", Resource: "r", Limit: "a", Kind: "rate", Capacity: 5}}, ExpiresMS: time.Minute.Milliseconds()}
	got, want := httptest.NewRecorder(), httptest.NewRecorder()
	buf := getRespBuf()
	writeAcquireResponse(got, &resp, buf)
	putRespBuf(buf)
	writeJSON(want, http.StatusOK, resp)
	if got.Code != want.Code || !reflect.DeepEqual(got.Header(), want.Header()) || got.Body.String() != want.Body.String() {
		t.Fatalf("wrote %d %v %s, writeJSON %d %v %s", got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
	}
}
