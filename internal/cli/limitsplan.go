package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// A saved plan (plan --out, apply --plan) holds each change with the
// version of the level it was planned on, so that apply refuses every
// level someone else changed between the two commands instead of
// overwriting it.

// planFormat names the format of a saved plan.
const planFormat = "tollgate-limits-plan/1"

// maxPlanFile bounds a saved plan read (a plan of a limits file of at
// most maxLimitsFile, with its old limits, is about twice as long).
const maxPlanFile = 4 * maxLimitsFile

// savedPlan is a plan as plan --out writes it.
type savedPlan struct {
	Format    string        `json:"format"`
	Namespace string        `json:"namespace"`
	Changes   []savedChange `json:"changes"`
}

// savedChange is one change of a saved plan: the level, what to do, the
// version it was planned on (0: none stored) and, to store, its limits.
type savedChange struct {
	Entity   string      `json:"entity,omitempty"`
	Resource string      `json:"resource,omitempty"`
	Action   string      `json:"action"`
	Version  int64       `json:"version,omitempty"`
	Limits   *api.Limits `json:"limits,omitempty"`
	Old      []string    `json:"old,omitempty"`
	New      []string    `json:"new,omitempty"`
}

// precondition returns opts with the change's condition on the level's
// version: none stored for a create, the version planned otherwise.
func (c change) precondition(opts []model.WriteOption) []model.WriteOption {
	opts = opts[:len(opts):len(opts)]
	if c.Action == "create" {
		return append(opts, tollgate.IfAbsent())
	}
	return append(opts, tollgate.IfVersion(c.Version))
}

// savePlan writes the changes to path, for apply --plan.
func (g *globals) savePlan(path string, changes []change) error {
	p := savedPlan{Format: planFormat, Namespace: g.namespaceName(), Changes: make([]savedChange, 0, len(changes))}
	for _, c := range changes {
		if c.Action == "unchanged" {
			continue
		}
		sc := savedChange{Entity: c.scope.Entity, Resource: c.scope.Resource, Action: c.Action, Version: c.Version, Old: c.Old, New: c.New}
		if c.Action != "delete" {
			l := api.FromConfig(c.cfg)
			sc.Limits = &l
		}
		p.Changes = append(p.Changes, sc)
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o600)
}

// namespaceName is the namespace the global flags name.
func (g *globals) namespaceName() string {
	if g.namespace == "" {
		return model.DefaultNamespace
	}
	return g.namespace
}

// readPlan reads and checks a saved plan: its format, its namespace
// (the one the flags name) and every change's level and limits.
func (g *globals) readPlan(path string) ([]change, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPlanFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxPlanFile {
		return nil, usagef("%s: larger than %d bytes", path, maxPlanFile)
	}
	var p savedPlan
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, usagef("%s: not a saved plan: %v", path, err)
	}
	if p.Format != planFormat {
		return nil, usagef("%s: format %q, want %q (a file written by tollgate limits plan --out)", path, p.Format, planFormat)
	}
	if p.Namespace != g.namespaceName() {
		return nil, usagef("%s: planned in namespace %q, not %q", path, p.Namespace, g.namespaceName())
	}
	changes := make([]change, 0, len(p.Changes))
	for i, sc := range p.Changes {
		c, err := sc.change()
		if err != nil {
			return nil, usagef("%s: change %d: %v", path, i+1, err)
		}
		changes = append(changes, c)
	}
	return changes, nil
}

// change checks a saved change and returns it as apply takes it.
func (sc savedChange) change() (change, error) {
	scope := model.Scope{Entity: sc.Entity, Resource: sc.Resource}
	if err := scope.Validate(); err != nil {
		return change{}, err
	}
	c := change{Scope: scopeName(scope), Action: sc.Action, Version: sc.Version, Old: sc.Old, New: sc.New, scope: scope}
	switch {
	case sc.Action != "create" && sc.Action != "update" && sc.Action != "delete":
		return change{}, fmt.Errorf("action %q: want create, update or delete", sc.Action)
	case sc.Version < 0 || sc.Action != "create" && sc.Version == 0:
		return change{}, fmt.Errorf("%s %s: version %d: want the version planned", sc.Action, c.Scope, sc.Version)
	case sc.Action == "delete":
		return c, nil
	case sc.Limits == nil:
		return change{}, fmt.Errorf("%s %s: no limits", sc.Action, c.Scope)
	}
	cfg, err := api.ToConfig(*sc.Limits)
	if err != nil {
		return change{}, err
	}
	if err := cfg.Validate(scope); err != nil {
		return change{}, err
	}
	c.cfg = cfg
	return c, nil
}

// applySavedPlan applies the plan saved at path: each change on the
// version it was planned on.
func (g *globals) applySavedPlan(cmd *cobra.Command, path string) error {
	changes, err := g.readPlan(path)
	if err != nil {
		return err
	}
	return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
		if err := g.apply(ctx, pl, changes); err != nil {
			return err
		}
		return g.printPlan(changes, "apply")
	})
}
