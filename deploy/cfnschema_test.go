package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// resourceSchema is a pinned CloudFormation resource schema
// (testdata/cfnschema).
type resourceSchema struct {
	TypeName            string         `json:"typeName"`
	Properties          map[string]any `json:"properties"`
	Definitions         map[string]any `json:"definitions"`
	Required            []string       `json:"required"`
	ReadOnlyProperties  []string       `json:"readOnlyProperties"`
	WriteOnlyProperties []string       `json:"writeOnlyProperties"`
}

// loadSchemas reads testdata/cfnschema, by type name.
func loadSchemas(t *testing.T) map[string]*resourceSchema {
	t.Helper()
	files, err := filepath.Glob("testdata/cfnschema/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no pinned schemas: %v", err)
	}
	out := map[string]*resourceSchema{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s resourceSchema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[s.TypeName] = &s
	}
	return out
}

// hasAttribute reports whether Fn::GetAtt may name attr ("Arn",
// "StreamArn", "QueueName") of a resource of this type: a property of the
// schema, read-only ones included.
func (s *resourceSchema) hasAttribute(attr string) bool {
	_, ok := s.Properties[strings.Split(attr, ".")[0]]
	return ok
}

// checkProperties checks a resource's Properties against its schema and
// returns what is wrong, each prefixed with its path.
func (s *resourceSchema) checkProperties(props map[string]any) []string {
	c := &schemaCheck{s: s}
	for _, ro := range s.ReadOnlyProperties {
		name := strings.TrimPrefix(ro, "/properties/")
		if !strings.Contains(name, "/") && props[name] != nil {
			c.fail("Properties."+name, "is read-only")
		}
	}
	c.value("Properties", map[string]any{"type": "object", "properties": s.Properties,
		"required": toAny(s.Required), "additionalProperties": false}, props)
	return c.errs
}

type schemaCheck struct {
	s    *resourceSchema
	errs []string
}

func (c *schemaCheck) fail(path, format string, args ...any) {
	c.errs = append(c.errs, path+": "+fmt.Sprintf(format, args...))
}

// resolve follows $ref to the schema's definitions.
func (c *schemaCheck) resolve(sch map[string]any) map[string]any {
	for i := 0; i < 10; i++ {
		ref, ok := sch["$ref"].(string)
		if !ok {
			return sch
		}
		def, ok := c.s.Definitions[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
		if !ok {
			return map[string]any{}
		}
		sch = def
	}
	return sch
}

// intrinsic reports whether v is an intrinsic function: its value is
// known only at deployment, except for Fn::If, whose branches are checked.
func intrinsic(v any) (name string, arg any, ok bool) {
	m, isMap := v.(map[string]any)
	if !isMap || len(m) != 1 {
		return "", nil, false
	}
	for k, a := range m {
		if k == "Ref" || strings.HasPrefix(k, "Fn::") {
			return k, a, true
		}
	}
	return "", nil, false
}

// value checks v against sch.
func (c *schemaCheck) value(path string, sch map[string]any, v any) {
	sch = c.resolve(sch)
	if name, arg, ok := intrinsic(v); ok {
		if name == "Fn::If" {
			if args, ok := arg.([]any); ok && len(args) == 3 {
				for _, branch := range args[1:] {
					if n, a, ok := intrinsic(branch); ok && n == "Ref" && a == "AWS::NoValue" {
						continue
					}
					c.value(path, sch, branch)
				}
			}
		}
		return
	}
	if types := schemaTypes(sch); len(types) > 0 && !slices.Contains(types, jsonType(v)) &&
		!(jsonType(v) == "number" && slices.Contains(types, "integer")) {
		c.fail(path, "is %s, want %s", jsonType(v), strings.Join(types, " or "))
		return
	}
	if enum, ok := sch["enum"].([]any); ok && !slices.Contains(enum, v) {
		c.fail(path, "%v is not one of %v", v, enum)
	}
	switch v := v.(type) {
	case string:
		if pat, ok := sch["pattern"].(string); ok {
			// JSON Schema patterns are searched, not anchored; patterns RE2
			// cannot compile (lookarounds) are skipped.
			if re, err := regexp.Compile(pat); err == nil && !re.MatchString(v) {
				c.fail(path, "%q does not match %s", v, pat)
			}
		}
		if n, ok := sch["minLength"].(float64); ok && float64(len(v)) < n {
			c.fail(path, "%q is shorter than %v", v, n)
		}
		if n, ok := sch["maxLength"].(float64); ok && float64(len(v)) > n {
			c.fail(path, "%q is longer than %v", v, n)
		}
	case float64:
		if n, ok := sch["minimum"].(float64); ok && v < n {
			c.fail(path, "%v is below %v", v, n)
		}
		if n, ok := sch["maximum"].(float64); ok && v > n {
			c.fail(path, "%v is above %v", v, n)
		}
	case map[string]any:
		props, _ := sch["properties"].(map[string]any)
		patterns, _ := sch["patternProperties"].(map[string]any)
		closed := sch["additionalProperties"] == false
		for k, x := range v {
			ps, ok := props[k].(map[string]any)
			for pat, psch := range patterns {
				if re, err := regexp.Compile(pat); !ok && err == nil && re.MatchString(k) {
					ps, ok = psch.(map[string]any)
				}
			}
			if !ok {
				if closed {
					c.fail(path+"."+k, "unknown property")
				}
				continue
			}
			c.value(path+"."+k, ps, x)
		}
		req, _ := sch["required"].([]any)
		for _, r := range req {
			if _, ok := v[r.(string)]; !ok {
				c.fail(path, "required property %s is missing", r)
			}
		}
	case []any:
		if items, ok := sch["items"].(map[string]any); ok {
			for i, x := range v {
				c.value(fmt.Sprintf("%s[%d]", path, i), items, x)
			}
		}
	}
}

func schemaTypes(sch map[string]any) []string {
	switch t := sch["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	return nil
}

func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	}
	return "null"
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
