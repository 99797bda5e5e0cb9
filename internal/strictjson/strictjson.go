// Package strictjson decodes JSON strictly: a document means one thing or
// is refused. encoding/json, even with DisallowUnknownFields, reads a null
// as "leave the zero value", lets the last of duplicate keys win, and
// matches member names to struct fields without regard to case, so that
// one document may be read differently by another parser (a proxy, a
// client, a log pipeline) than by the decoder. Unmarshal refuses all
// three, checking the document against the Go type it decodes into (its
// json tags, read by reflection, recursing into structs, maps, slices and
// pointers), and only then lets encoding/json decode it.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// An Error is a document that is well-formed JSON but that Unmarshal
// refuses: Field says where, Value (possibly empty) what, Reason why.
type Error struct {
	// Field is the path of the offending member as sent, its names joined
	// with dots and array indexes in brackets: "consume.tpm", "limits[2]".
	// It is empty when the document as a whole is at fault (trailing
	// data, or not the kind of value wanted).
	Field  string
	Value  string
	Reason string
}

func (e *Error) Error() string {
	s := "json: "
	if e.Field != "" {
		s += e.Field + ": "
	}
	if e.Value != "" {
		s += strconv.Quote(e.Value) + ": "
	}
	return s + e.Reason
}

// Unmarshal decodes data, which must hold exactly one JSON value (and
// whitespace), into v, a non-nil pointer, refusing:
//   - null anywhere, even inside values encoding/json would ignore;
//   - an object with the same key twice, at any depth (keys are compared
//     as decoded, escapes resolved);
//   - a member that names no field of the struct it is decoded into,
//     exactly: encoding/json would match "ENTITY" to a field "entity";
//   - a value of the wrong JSON kind for its Go type, or a number out of
//     its type's range;
//   - anything after the value.
//
// Types that decode themselves (json.Unmarshaler, encoding.TextUnmarshaler)
// and interfaces are checked for null and duplicate keys only, and left to
// encoding/json for the rest.
//
// Errors are io.EOF when data holds no value, io.ErrUnexpectedEOF when it
// ends inside one, *json.SyntaxError when it is malformed, and *Error for
// the rest. Malformed JSON is reported before any other fault.
func Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &json.InvalidUnmarshalError{Type: reflect.TypeOf(v)}
	}
	raw, err := single(data)
	if err != nil {
		return err
	}
	c := checker{dec: json.NewDecoder(bytes.NewReader(raw))}
	c.dec.UseNumber()
	if err := c.value(rv.Type().Elem(), ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// single returns the one JSON value of data, checked to be well-formed.
func single(data []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Reason: "trailing data after the JSON value"}
	}
	return raw, nil
}

// checker walks a well-formed document, one token at a time, alongside the
// Go type it is to be decoded into.
type checker struct {
	dec *json.Decoder
}

// value checks the next value of the document against t; path names it.
func (c *checker) value(t reflect.Type, path string) error {
	tok, err := c.dec.Token()
	if err != nil {
		return err // not for a well-formed document
	}
	t, opaque := target(t)
	switch tok := tok.(type) {
	case nil:
		return nullError(path)
	case json.Delim: // '{' or '[': the document is well-formed
		switch {
		case opaque:
			return c.rest(tok, path)
		case tok == '{' && t.Kind() == reflect.Struct:
			return c.object(path, structKeys(t))
		case tok == '{' && t.Kind() == reflect.Map:
			return c.object(path, mapKeys{t.Elem()})
		case tok == '[' && (t.Kind() == reflect.Array || t.Kind() == reflect.Slice && !isBytes(t)):
			return c.array(t.Elem(), path)
		}
		kind := "object"
		if tok == '[' {
			kind = "array"
		}
		return mismatch(t, path, kind, "")
	case string:
		if opaque || t.Kind() == reflect.String || isBytes(t) {
			return nil
		}
		return mismatch(t, path, "string", "")
	case bool:
		if opaque || t.Kind() == reflect.Bool {
			return nil
		}
		return mismatch(t, path, "boolean", "")
	case json.Number:
		if opaque || fitsNumber(t, string(tok)) {
			return nil
		}
		return mismatch(t, path, "number", string(tok))
	}
	return nil
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonNumber      = reflect.TypeFor[json.Number]()
)

// isBytes reports whether t is a slice of bytes, which encoding/json
// reads from a base64 string.
func isBytes(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8
}

// target returns the type a value decodes into once pointers are followed,
// and whether that is opaque: an interface, json.Number, or a type that
// decodes itself, whose shape only encoding/json knows.
func target(t reflect.Type) (reflect.Type, bool) {
	for {
		if t.Kind() == reflect.Interface || t == jsonNumber {
			return t, true
		}
		pt := reflect.PointerTo(t)
		if t.Implements(jsonUnmarshaler) || pt.Implements(jsonUnmarshaler) ||
			t.Implements(textUnmarshaler) || pt.Implements(textUnmarshaler) {
			return t, true
		}
		if t.Kind() != reflect.Pointer {
			return t, false
		}
		t = t.Elem()
	}
}

// fitsNumber reports whether the number literal n decodes into t as
// encoding/json decodes it: integers in range, without fraction or
// exponent, for integer types; any finite float in range for float types.
func fitsNumber(t reflect.Type, n string) bool {
	var err error
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		_, err = strconv.ParseInt(n, 10, t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		_, err = strconv.ParseUint(n, 10, t.Bits())
	case reflect.Float32, reflect.Float64:
		_, err = strconv.ParseFloat(n, t.Bits())
	default:
		return false
	}
	return err == nil
}

// nullError is the error of a null at path: a member's, with the way out,
// or an array element's or the document's.
func nullError(path string) error {
	reason := "null is not allowed"
	if path != "" && !strings.HasSuffix(path, "]") {
		reason += ": leave the member out instead"
	}
	return &Error{Field: path, Value: "null", Reason: reason}
}

// mismatch is the error of a value of JSON kind got where t was wanted.
func mismatch(t reflect.Type, path, got, value string) error {
	return &Error{Field: path, Value: value, Reason: "want " + t.String() + ", got JSON " + got}
}

// keys says what the members of an object decode into.
type keys interface {
	// member returns the type of key's value, or an error naming field,
	// the member's path, when the object may not have it.
	member(key, field string) (reflect.Type, error)
}

// object checks the members of an object whose '{' was read, up to its '}'.
func (c *checker) object(path string, ks keys) error {
	seen := map[string]bool{}
	for c.dec.More() {
		tok, err := c.dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string) // a well-formed document's keys are strings
		field := join(path, key)
		if seen[key] {
			return &Error{Field: field, Reason: "duplicate key: each member may appear once"}
		}
		seen[key] = true
		var t reflect.Type
		if ks != nil {
			if t, err = ks.member(key, field); err != nil {
				return err
			}
		}
		if t == nil {
			err = c.any(field)
		} else {
			err = c.value(t, field)
		}
		if err != nil {
			return err
		}
	}
	_, err := c.dec.Token() // '}'
	return err
}

// array checks the elements, of type elem, of an array whose '[' was read,
// up to its ']'.
func (c *checker) array(elem reflect.Type, path string) error {
	for i := 0; c.dec.More(); i++ {
		if err := c.value(elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
			return err
		}
	}
	_, err := c.dec.Token() // ']'
	return err
}

// any checks a value of no known type: no null, no duplicate keys.
func (c *checker) any(path string) error {
	tok, err := c.dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		return nullError(path)
	}
	if d, ok := tok.(json.Delim); ok {
		return c.rest(d, path)
	}
	return nil
}

// rest checks the rest of an object or array of no known type whose
// opening delim was read.
func (c *checker) rest(delim json.Delim, path string) error {
	if delim == '{' {
		return c.object(path, nil)
	}
	for i := 0; c.dec.More(); i++ {
		if err := c.any(path + "[" + strconv.Itoa(i) + "]"); err != nil {
			return err
		}
	}
	_, err := c.dec.Token() // ']'
	return err
}

// join is the path of member key of the value at path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapKeys are the members of an object decoded into a map: any key, each
// value of type elem.
type mapKeys struct{ elem reflect.Type }

func (m mapKeys) member(string, string) (reflect.Type, error) { return m.elem, nil }

// fields are the members of an object decoded into a struct: its fields'
// JSON names, exactly, each to its field's type (nil: opaque, as for a
// field with the ",string" option).
type fields map[string]reflect.Type

func (f fields) member(key, field string) (reflect.Type, error) {
	t, ok := f[key]
	if ok {
		return t, nil
	}
	reason := "unknown field"
	for name := range f {
		if strings.EqualFold(name, key) {
			reason += " (names are case-sensitive: " + strconv.Quote(name) + ")"
			break
		}
	}
	return nil, &Error{Field: field, Reason: reason}
}

// structFields caches structKeys by type.
var structFields sync.Map // reflect.Type -> fields

// structKeys returns the members a struct of type t decodes, by the rules
// of encoding/json: exported fields under their tag's name or their own,
// "-" left out, embedded structs' fields promoted unless a shallower field
// has the name, and of equally deep fields with one name, the tagged one,
// or none.
func structKeys(t reflect.Type) fields {
	if f, ok := structFields.Load(t); ok {
		return f.(fields)
	}
	type candidate struct {
		t      reflect.Type
		depth  int
		tagged bool
		count  int // of equally deep, equally tagged fields with the name
	}
	found := map[string]*candidate{}
	var walk func(t reflect.Type, depth int, visited map[reflect.Type]bool)
	walk = func(t reflect.Type, depth int, visited map[reflect.Type]bool) {
		if visited[t] {
			return
		}
		visited[t] = true
		defer delete(visited, t)
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			ft := sf.Type
			if sf.Anonymous {
				et := ft
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if name == "" && et.Kind() == reflect.Struct {
					walk(et, depth+1, visited)
					continue
				}
				if !sf.IsExported() && et.Kind() != reflect.Struct {
					continue
				}
			} else if !sf.IsExported() {
				continue
			}
			tagged := name != ""
			if !tagged {
				name = sf.Name
			}
			if hasOption(opts, "string") {
				ft = nil // its value is a string of JSON: encoding/json checks it
			}
			c, ok := found[name]
			switch {
			case !ok || depth < c.depth || (depth == c.depth && tagged && !c.tagged):
				found[name] = &candidate{t: ft, depth: depth, tagged: tagged, count: 1}
			case depth == c.depth && tagged == c.tagged:
				c.count++
			}
		}
	}
	walk(t, 0, map[reflect.Type]bool{})
	f := fields{}
	for name, c := range found {
		if c.count == 1 {
			f[name] = c.t
		}
	}
	structFields.Store(t, f)
	return f
}

// hasOption reports whether a json tag's options list opt.
func hasOption(opts, opt string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == opt {
			return true
		}
	}
	return false
}
