package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
)

// maxLimitsFile bounds the limits file read.
const maxLimitsFile = 16 << 20

type limitsFile struct {
	System    *levelLimits             `yaml:"system"`
	Resources map[string]*levelLimits  `yaml:"resources"`
	Entities  map[string]*entityLimits `yaml:"entities"`
}

type levelLimits struct {
	Limits []string `yaml:"limits"`
	// Shadow names limits of Limits enforced in shadow.
	Shadow []string `yaml:"shadow"`
	// AlertAt are the alert thresholds (fractions of capacity).
	AlertAt       []float64 `yaml:"alert_at"`
	OnUnavailable string    `yaml:"on_unavailable"`
}

type entityLimits struct {
	// Limits is the entity's default: absent leaves it alone, [] deletes it.
	Limits    entityLevel            `yaml:"limits"`
	Resources map[string]entityLevel `yaml:"resources"`
}

// entityLevel is one of an entity's levels in a limits file: a list of
// limits, or, to enforce some in shadow or set alert thresholds, a mapping
// of "limits", "shadow" and "alert_at".
type entityLevel struct {
	set            bool // present in the file
	limits, shadow []string
	alertAt        []float64
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (l *entityLevel) UnmarshalYAML(n *yaml.Node) error {
	l.set = true
	if n.Kind != yaml.MappingNode {
		return n.Decode(&l.limits)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		var dst any
		switch k.Value {
		case "limits":
			dst = &l.limits
		case "shadow":
			dst = &l.shadow
		case "alert_at":
			dst = &l.alertAt
		default:
			return fmt.Errorf("line %d: field %s not found: an entity's level has limits, shadow and alert_at", k.Line, k.Value)
		}
		if err := n.Content[i+1].Decode(dst); err != nil {
			return err
		}
	}
	return nil
}

// desiredScope is one level a limits file names.
type desiredScope struct {
	scope  tollgate.Scope
	cfg    tollgate.Config
	delete bool
}

// readLimitsFile parses and validates a limits file ("-": standard input)
// into the levels it names, in a stable order.
func (g *globals) readLimitsFile(path string) ([]desiredScope, error) {
	var r io.Reader = g.stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxLimitsFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxLimitsFile {
		return nil, usagef("%s: larger than %d bytes", path, maxLimitsFile)
	}
	ds, err := parseLimitsFile(data)
	if err != nil {
		name := path
		if path == "-" {
			name = "<stdin>"
		}
		var fe *fileError
		if errors.As(err, &fe) && fe.line > 0 {
			return nil, usagef("%s:%d: %s", name, fe.line, fe.msg)
		}
		return nil, usagef("%s: %v", name, err)
	}
	return ds, nil
}

func parseLimitsFile(data []byte) ([]desiredScope, error) {
	var f limitsFile
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(err, nil)
	}
	lines := findKeyLines(&root)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && err != io.EOF {
		return nil, yamlError(err, lines)
	}
	var out []desiredScope
	add := func(where string, scope tollgate.Scope, limits, shadow []string, alertAt []float64, mode string) error {
		d := desiredScope{scope: scope, delete: limits != nil && len(limits) == 0}
		if !d.delete {
			cfg, err := api.ToConfig(api.Limits{Limits: limits, Shadow: shadow, AlertAt: alertAt, OnUnavailable: mode})
			if err == nil {
				err = cfg.Validate(scope)
			}
			if err != nil {
				return &fileError{line: lines.lineOf(where, err), msg: where + ": " + err.Error(), err: err}
			}
			d.cfg = cfg
		}
		out = append(out, d)
		return nil
	}
	if f.System != nil {
		if err := add("system", tollgate.SystemScope(), orEmpty(f.System.Limits), f.System.Shadow, f.System.AlertAt, f.System.OnUnavailable); err != nil {
			return nil, err
		}
	}
	for _, r := range sortedKeys(f.Resources) {
		l := f.Resources[r]
		if l == nil {
			l = &levelLimits{}
		}
		if l.OnUnavailable != "" {
			where := "resources." + r + ".on_unavailable"
			return nil, &fileError{line: lines.byPath[where], msg: where + ": meaningful at system level only"}
		}
		if err := add("resources."+r, tollgate.ResourceScope(r), orEmpty(l.Limits), l.Shadow, l.AlertAt, ""); err != nil {
			return nil, err
		}
	}
	for _, id := range sortedKeys(f.Entities) {
		e := f.Entities[id]
		if e == nil {
			continue
		}
		if e.Limits.set {
			if err := add("entities."+id, tollgate.EntityScope(id, ""), orEmpty(e.Limits.limits), e.Limits.shadow, e.Limits.alertAt, ""); err != nil {
				return nil, err
			}
		}
		for _, r := range sortedKeys(e.Resources) {
			l := e.Resources[r]
			if err := add("entities."+id+".resources."+r, tollgate.EntityScope(id, r), orEmpty(l.limits), l.shadow, l.alertAt, ""); err != nil {
				return nil, err
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("names no level (want system, resources or entities)")
	}
	return out, nil
}

// orEmpty makes a level named without limits a deletion.
func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
