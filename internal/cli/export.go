package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
)

// The file limits export writes: the format of limitsfile.go, with empty
// fields left out (an empty list there means "delete").
type exportFile struct {
	System    *exportLevel             `yaml:"system,omitempty"`
	Resources map[string]exportLevel   `yaml:"resources,omitempty"`
	Entities  map[string]*exportEntity `yaml:"entities,omitempty"`
}

type exportLevel struct {
	Limits        flowList    `yaml:"limits"`
	Shadow        flowList    `yaml:"shadow,omitempty"`
	AlertAt       flowNumbers `yaml:"alert_at,omitempty"`
	OnUnavailable string      `yaml:"on_unavailable,omitempty"`
}

type exportEntity struct {
	Limits    *exportEntityLevel           `yaml:"limits,omitempty"`
	Resources map[string]exportEntityLevel `yaml:"resources,omitempty"`
}

// exportEntityLevel is an entity's level as limitsfile.go reads it: its
// limits on one line, or a mapping of them, its shadow limits and its
// alert thresholds.
type exportEntityLevel struct {
	limits, shadow flowList
	alertAt        flowNumbers
}

// MarshalYAML implements yaml.Marshaler.
func (l exportEntityLevel) MarshalYAML() (any, error) {
	if len(l.shadow) == 0 && len(l.alertAt) == 0 {
		return l.limits.MarshalYAML()
	}
	return struct {
		Limits  flowList    `yaml:"limits"`
		Shadow  flowList    `yaml:"shadow,omitempty"`
		AlertAt flowNumbers `yaml:"alert_at,omitempty"`
	}{l.limits, l.shadow, l.alertAt}, nil
}

// flowNumbers is a list of numbers written on one line: [0.8, 1].
type flowNumbers []float64

// MarshalYAML implements yaml.Marshaler.
func (l flowNumbers) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, v := range l {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatFloat(v, 'g', -1, 64)})
	}
	return n, nil
}

// flowList is a list of limits written on one line, each quoted:
// ["rpm:100/min", "tpm:10000/min"].
type flowList []string

// MarshalYAML implements yaml.Marshaler.
func (l flowList) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, s := range l {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Value: s})
	}
	return n, nil
}

func newLimitsExportCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "export",
		Short: "Write the stored limits as a limits file (YAML) that plan and apply read",
		Long: `Write every stored level of limits as a limits file on standard output:
"tollgate limits plan -f" of it right after reports no change. A level
stored with no limits cannot be written (an empty list in the file deletes
the level): it is left out, with a warning on standard error. Through a
server (--server) it reads GET /v1/limits.`,
		Example: "  tollgate limits export > limits.yaml\n  tollgate limits export --store embedded:tollgate.db -n tenant-a",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				cfgs, err := listConfigs(ctx, pl)
				if err != nil {
					return err
				}
				f, skipped := exportOf(cfgs)
				for _, s := range skipped {
					fmt.Fprintf(g.stderr, "tollgate: %s has no limits stored, which a limits file cannot say: left out\n", scopeName(s))
				}
				return writeExport(g.stdout, f)
			})
		},
	}
}

// listConfigs reads every stored config, a page at a time.
func listConfigs(ctx context.Context, pl *planes) ([]tollgate.ScopedConfig, error) {
	var out []tollgate.ScopedConfig
	var after *tollgate.Scope
	for {
		page, err := pl.adm.ListLimits(ctx, after, tollgate.MaxConfigPage)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < tollgate.MaxConfigPage {
			return out, nil
		}
		after = &page[len(page)-1].Scope
	}
}

// exportOf builds the file of cfgs, and the scopes it cannot hold (no
// limits stored).
func exportOf(cfgs []tollgate.ScopedConfig) (exportFile, []tollgate.Scope) {
	var f exportFile
	var skipped []tollgate.Scope
	for _, c := range cfgs {
		limits := flowList(api.FromConfig(c.Config).Limits)
		if len(limits) == 0 {
			skipped = append(skipped, c.Scope)
			continue
		}
		switch sc := c.Scope; sc.Level() {
		case "system":
			f.System = &exportLevel{Limits: limits, Shadow: c.Config.Shadow, AlertAt: c.Config.AlertAt,
				OnUnavailable: string(c.Config.OnUnavailable)}
		case "resource":
			f.Resources = putLevel(f.Resources, sc.Resource, exportLevel{Limits: limits, Shadow: c.Config.Shadow, AlertAt: c.Config.AlertAt})
		default:
			e := entityOf(&f, sc.Entity)
			level := exportEntityLevel{limits: limits, shadow: c.Config.Shadow, alertAt: c.Config.AlertAt}
			if sc.Resource == tollgate.DefaultResource {
				e.Limits = &level
			} else {
				e.Resources = putLevel(e.Resources, sc.Resource, level)
			}
		}
	}
	return f, skipped
}

func putLevel[V any](m map[string]V, k string, v V) map[string]V {
	if m == nil {
		m = make(map[string]V)
	}
	m[k] = v
	return m
}

func entityOf(f *exportFile, id string) *exportEntity {
	if e := f.Entities[id]; e != nil {
		return e
	}
	e := &exportEntity{}
	f.Entities = putLevel(f.Entities, id, e)
	return e
}

// writeExport writes f as YAML (keys sorted); an empty store writes
// "{}", which plan refuses as naming no level.
func writeExport(w io.Writer, f exportFile) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return err
	}
	return enc.Close()
}
