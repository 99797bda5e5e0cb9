package main

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// An image as Lambda sends it, with an attribute of every type: S and N
// read as themselves, everything else (and what is absent) as "".
func TestImage(t *testing.T) {
	const js = `{
		"s":    {"S": "hello"},
		"e":    {"S": ""},
		"n":    {"N": "-12345678901234567"},
		"f":    {"N": "1.5"},
		"b":    {"B": "AQI="},
		"bool": {"BOOL": true},
		"null": {"NULL": true},
		"l":    {"L": [{"S": "x"}, {"N": "1"}]},
		"m":    {"M": {"s": {"S": "inner"}}},
		"ss":   {"SS": ["a", "b"]},
		"ns":   {"NS": ["1", "2"]},
		"bs":   {"BS": ["AQ=="]}
	}`
	var m map[string]events.DynamoDBAttributeValue
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	img := imageOf(m)
	wantS := map[string]string{"s": "hello"}
	wantN := map[string]string{"n": "-12345678901234567", "f": "1.5"}
	for name := range m {
		if got := img.S(name); got != wantS[name] {
			t.Errorf("S(%q) = %q, want %q", name, got, wantS[name])
		}
		if got := img.N(name); got != wantN[name] {
			t.Errorf("N(%q) = %q, want %q", name, got, wantN[name])
		}
	}
	if img.S("absent") != "" || img.N("absent") != "" {
		t.Error("an absent attribute does not read as empty")
	}
	names := img.Names()
	slices.Sort(names)
	if want := []string{"b", "bool", "bs", "e", "f", "l", "m", "n", "ns", "null", "s", "ss"}; !slices.Equal(names, want) {
		t.Errorf("Names = %v, want %v", names, want)
	}
}

// A record without an image (the old one of an INSERT, the new one of a
// REMOVE) has no Image at all, which is what stream.ChangeOf expects.
func TestImageOfAbsent(t *testing.T) {
	if img := imageOf(nil); img != nil {
		t.Errorf("imageOf(nil) = %#v, want nil", img)
	}
	img := imageOf(map[string]events.DynamoDBAttributeValue{})
	if img == nil || len(img.Names()) != 0 || img.S("x") != "" {
		t.Errorf("imageOf(empty) = %#v, want an empty image", img)
	}
}
