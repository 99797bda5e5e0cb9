package cli

import (
	"errors"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/tollgate-rl/tollgate"
)

// A limits file's mistakes are reported as FILE:LINE: WHERE: WHAT, the
// line and the level (resources.api, entities.org-1.resources.llm) found
// in the file's YAML tree, so that a typo points at itself rather than
// at the CLI's Go types (yaml's "field limit not found in type
// cli.levelLimits").

// fileError is a mistake at a line of a limits file (0: none known).
type fileError struct {
	line int
	msg  string
	err  error // what it wraps, if anything
}

func (e *fileError) Error() string {
	if e.line > 0 {
		return "line " + strconv.Itoa(e.line) + ": " + e.msg
	}
	return e.msg
}

func (e *fileError) Unwrap() error { return e.err }

// keyLines knows where each mapping key of a limits file is: its line by
// its dotted path (resources.api.limits), and its path by line and name.
type keyLines struct {
	byPath map[string]int
	byLine map[lineKey]string
}

type lineKey struct {
	line int
	name string
}

// fieldsOf names the fields each level takes, for the message of an
// unknown one (keyed by the Go type yaml names).
var fieldsOf = map[string]string{
	"cli.limitsFile":   "system, resources and entities",
	"cli.levelLimits":  "limits, shadow, alert_at and on_unavailable (system only)",
	"cli.entityLimits": "limits and resources",
}

func findKeyLines(root *yaml.Node) *keyLines {
	kl := &keyLines{byPath: map[string]int{}, byLine: map[lineKey]string{}}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if _, dup := kl.byPath[p]; !dup {
					kl.byPath[p] = k.Line
				}
				kl.byLine[lineKey{k.Line, k.Value}] = path
				walk(n.Content[i+1], p)
			}
		}
	}
	walk(root, "")
	return kl
}

// lineOf is the line of the level where, or of the field within it that
// err names (a *tollgate.ValidationError's limits, shadow, alert_at).
func (kl *keyLines) lineOf(where string, err error) int {
	if kl == nil {
		return 0
	}
	var ve *tollgate.ValidationError
	if errors.As(err, &ve) {
		for f := ve.Field; f != ""; {
			if l, ok := kl.byPath[where+"."+f]; ok {
				return l
			}
			i := strings.LastIndexByte(f, '.')
			if i < 0 {
				break
			}
			f = f[:i]
		}
		// A limit's field (limit.rpm.window) is under the level's limits.
		if l, ok := kl.byPath[where+".limits"]; ok {
			return l
		}
	}
	if l, ok := kl.byPath[where]; ok {
		return l
	}
	// An entity's default level (entities.ID) is written entities.ID.limits.
	return kl.byPath[strings.TrimSuffix(where, ".limits")]
}

var (
	// yamlLine is a line yaml reports: "yaml: line 3: ..." (syntax) or
	// "line 3: ..." (each of an unmarshal error's).
	yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	// yamlField is an unknown field: "field limit not found in type
	// cli.levelLimits", or an entity level's own "field x not found: ...".
	yamlField = regexp.MustCompile(`^field (\S+) not found(?: in type (\S+))?`)
)

// yamlError makes yaml's err name the line, the level and the field, in
// the file's words: the first of an unmarshal error's messages (one
// mistake at a time, as the validation reports).
func yamlError(err error, kl *keyLines) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return &fileError{msg: strings.TrimPrefix(msg, "yaml: "), err: err}
	}
	line, _ := strconv.Atoi(m[1])
	what := m[2]
	if f := yamlField.FindStringSubmatch(what); f != nil && kl != nil {
		where := kl.byLine[lineKey{line, f[1]}]
		if where == "" {
			where = "the top level"
		}
		want := fieldsOf[f[2]]
		if f[2] == "" { // an entity level's own message says what it takes
			want = "limits, shadow and alert_at"
		}
		what = "field " + strconv.Quote(f[1]) + " not found in " + where
		if want != "" {
			what += ": want " + want
		}
	} else if kl != nil {
		// A wrong type: name the field on that line, if one is.
		for k, path := range kl.byLine {
			if k.line == line {
				if path != "" {
					path += "."
				}
				what = path + k.name + ": " + what
				break
			}
		}
	}
	return &fileError{line: line, msg: what, err: err}
}
