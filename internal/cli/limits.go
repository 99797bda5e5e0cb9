package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// scopeFlags pick one level of limits.
type scopeFlags struct {
	system      bool
	resource    string
	entity      string
	forResource string
}

func (f *scopeFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.system, "system", false, "the system-wide limits")
	cmd.Flags().StringVar(&f.resource, "resource", "", "the limits of a resource")
	cmd.Flags().StringVar(&f.entity, "entity", "", "an entity's limits (its default, or with --for-resource one resource's)")
	cmd.Flags().StringVar(&f.forResource, "for-resource", "", "with --entity: the resource")
	cmd.MarkFlagsMutuallyExclusive("system", "resource", "entity")
	cmd.MarkFlagsOneRequired("system", "resource", "entity")
}

func (f *scopeFlags) scope() (tollgate.Scope, error) {
	if f.forResource != "" && f.entity == "" {
		return tollgate.Scope{}, usagef("--for-resource needs --entity")
	}
	switch {
	case f.system:
		return tollgate.SystemScope(), nil
	case f.resource != "":
		return tollgate.ResourceScope(f.resource), nil
	}
	return tollgate.EntityScope(f.entity, f.forResource), nil
}

func newLimitsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Set, show and delete stored limits; plan and apply them from a file",
		Long: `Limits are stored at four levels: system, resource, entity default and
entity+resource. An acquire uses the most specific level that has limits.
Limits use the syntax name:rate[/[N]unit][:burst], name:N/concurrent or
name:N/reserved, e.g. rpm:100/min, tpm:10000/min:15000, inflight:10/concurrent,
clusters:3/reserved; a calendar quota is name:N/unit@zone (hour, day, week or
month of an IANA time zone), e.g. tok:1000000/month@UTC, refilled to N at
each boundary of that calendar.`,
		Example: `  tollgate limits set --resource api rpm:100/min
  tollgate limits get --entity org-1 --for-resource api -o json
  tollgate limits plan -f limits.yaml && tollgate limits apply -f limits.yaml
  tollgate limits export > limits.yaml`,
	}
	cmd.AddCommand(newLimitsSetCmd(g), newLimitsGetCmd(g), newLimitsDeleteCmd(g),
		newLimitsFileCmd(g, "plan"), newLimitsFileCmd(g, "apply"), newLimitsFileCmd(g, "diff"), newLimitsExportCmd(g))
	return cmd
}

func newLimitsSetCmd(g *globals) *cobra.Command {
	var f scopeFlags
	var mode string
	var shadow []string
	var alertAt []float64
	cmd := &cobra.Command{
		Use:   "set LIMIT...",
		Short: "Replace the limits at one level",
		Example: `  tollgate limits set --system rpm:1000/min --on-unavailable allow
  tollgate limits set --resource openai/gpt-4o tpm:100000/min rpm:500/min
  tollgate limits set --resource openai/gpt-4o tpm:100000/min rpm:500/min --shadow tpm
  tollgate limits set --resource openai/gpt-4o tpm:100000/min --alert-at 0.8,1.0
  tollgate limits set --entity org-1 --for-resource api rpm:100/min inflight:10/concurrent
  tollgate limits set --entity org-1 --for-resource llm tok:1000000/month@UTC`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, err := f.scope()
			if err != nil {
				return err
			}
			if mode != "" && !f.system {
				return usagef("--on-unavailable applies to the system level only (--system)")
			}
			cfg, err := api.ToConfig(api.Limits{Limits: args, Shadow: shadow, AlertAt: alertAt, OnUnavailable: mode})
			if err == nil {
				err = cfg.Validate(scope)
			}
			if err != nil {
				return usageError{err}
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				if err := pl.adm.SetLimits(ctx, scope, cfg, pl.who...); err != nil {
					return err
				}
				return g.printConfig(scope, cfg)
			})
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&mode, "on-unavailable", "", "with --system: block or allow when the store does not answer")
	cmd.Flags().StringSliceVar(&shadow, "shadow", nil, "enforce these of the limits in shadow: debited, never denying (repeat, or comma-separate)")
	cmd.Flags().Float64SliceVar(&alertAt, "alert-at", nil, "alert (serve --alert-webhook) when an entity's use of a limit crosses these fractions of capacity upward, ascending (e.g. 0.8,1.0)")
	return cmd
}

func newLimitsGetCmd(g *globals) *cobra.Command {
	var f scopeFlags
	cmd := &cobra.Command{
		Use:     "get",
		Short:   "Show the limits stored at one level",
		Example: "  tollgate limits get --resource api\n  tollgate limits get --entity org-1 -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scope, err := f.scope()
			if err != nil {
				return err
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				cfg, err := pl.adm.GetLimits(ctx, scope)
				if err != nil {
					return err
				}
				return g.printConfig(scope, cfg)
			})
		},
	}
	f.add(cmd)
	return cmd
}

func newLimitsDeleteCmd(g *globals) *cobra.Command {
	var f scopeFlags
	cmd := &cobra.Command{
		Use:     "delete",
		Short:   "Delete the limits stored at one level",
		Example: "  tollgate limits delete --entity org-1 --for-resource api",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scope, err := f.scope()
			if err != nil {
				return err
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error { return pl.adm.DeleteLimits(ctx, scope, pl.who...) })
		},
	}
	f.add(cmd)
	return cmd
}

func (g *globals) printConfig(scope tollgate.Scope, cfg tollgate.Config) error {
	body := api.FromConfig(cfg)
	return g.printOut(body, func(w *tabwriter.Writer) {
		row(w, "SCOPE", "LIMITS", "SHADOW", "ALERT AT", "ON UNAVAILABLE")
		row(w, scopeName(scope), strings.Join(body.Limits, " "), dash(strings.Join(body.Shadow, " ")), dash(alertText(body.AlertAt, " ")), dash(body.OnUnavailable))
	})
}

func scopeName(s tollgate.Scope) string {
	switch {
	case s.Entity == "" && s.Resource == "":
		return "system"
	case s.Entity == "":
		return "resource " + s.Resource
	case s.Resource == model.DefaultResource || s.Resource == "":
		return "entity " + s.Entity
	}
	return "entity " + s.Entity + " resource " + s.Resource
}

func newLimitsFileCmd(g *globals, verb string) *cobra.Command {
	var file, out, saved string
	short := map[string]string{
		"plan":  "Show what applying a limits file would change",
		"apply": "Make the stored limits match a limits file",
		"diff":  "Report drift between a limits file and the store (exit 1 if any)",
	}[verb]
	cmd := &cobra.Command{
		Use:   verb + " -f FILE",
		Short: short,
		Long: short + `.

The file names the levels it manages; levels it does not name are left
alone ("tollgate limits export" writes a file naming every stored level).
A level listed with an empty list ("limits: []") is deleted. Entities
named with limits must exist: plan, apply and diff fail, naming every one
missing, before anything is written. Apply then writes the changes one by
one; if one fails, it says which were applied, and running apply again
resumes (the plan lists only what still differs).

Each change is written on the version of the level that was planned (its
"version" in -o json): a level someone else changed since is not
overwritten; apply stops there, naming it, and exits non-zero. "plan
--out PLAN" saves the plan, and "apply --plan PLAN" applies exactly that
plan, refusing every level changed between the two commands:

  tollgate limits plan -f limits.yaml --out limits.plan
  tollgate limits apply --plan limits.plan

A limits file:

  system:
    limits: ["rpm:10000/min"]
    on_unavailable: allow
  resources:
    openai/gpt-4o:
      limits: ["tpm:100000/min", "rpm:500/min"]
  entities:
    org-1:
      limits: ["rpm:1000/min"]        # the entity's default
      resources:
        api: ["rpm:100/min", "inflight:10/concurrent"]
        legacy: []                    # delete these`,
		Example: "  tollgate limits " + verb + " -f limits.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if saved != "" {
				return g.applySavedPlan(cmd, saved)
			}
			if file == "" {
				return usagef("give a limits file (-f FILE) or, to apply, a saved plan (--plan PLAN)")
			}
			desired, err := g.readLimitsFile(file)
			if err != nil {
				return err
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				changes, err := plan(ctx, pl, desired)
				if err != nil {
					return err
				}
				if out != "" {
					if err := g.savePlan(out, changes); err != nil {
						return err
					}
				}
				if verb == "apply" {
					if err := g.apply(ctx, pl, changes); err != nil {
						return err
					}
				}
				if err := g.printPlan(changes, verb); err != nil {
					return err
				}
				if verb == "diff" && countChanges(changes) > 0 {
					return reportedError{errDrift}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "limits file (YAML; - for standard input)")
	switch verb {
	case "plan":
		cmd.Flags().StringVar(&out, "out", "", "also save the plan to this file, for apply --plan")
	case "apply":
		cmd.Flags().StringVar(&saved, "plan", "", "apply this saved plan (plan --out) instead of a limits file")
		cmd.MarkFlagsMutuallyExclusive("file", "plan")
	}
	if verb != "apply" {
		_ = cmd.MarkFlagRequired("file")
	}
	return cmd
}

var errDrift = errors.New("the stored limits differ from the file")

// change is one level's difference between the store and the file.
type change struct {
	Scope  string   `json:"scope"`
	Action string   `json:"action"` // create, update, delete or unchanged
	Old    []string `json:"old,omitempty"`
	New    []string `json:"new,omitempty"`
	// Version is the version of the stored level that was planned (0:
	// none was stored): apply writes on it (precondition).
	Version int64 `json:"version,omitempty"`

	scope tollgate.Scope
	cfg   tollgate.Config
}

func countChanges(cs []change) int {
	n := 0
	for _, c := range cs {
		if c.Action != "unchanged" {
			n++
		}
	}
	return n
}

// plan compares each level the file names with the store. It fails,
// before comparing anything, if an entity the file gives limits to does
// not exist: apply would refuse to write them.
func plan(ctx context.Context, pl *planes, desired []desiredScope) ([]change, error) {
	if err := checkEntities(ctx, pl, desired); err != nil {
		return nil, err
	}
	out := make([]change, 0, len(desired))
	for _, d := range desired {
		cur, err := pl.adm.GetLimits(ctx, d.scope)
		exists := err == nil
		if err != nil && !errors.Is(err, model.ErrNotFound) {
			return nil, err
		}
		c := change{Scope: scopeName(d.scope), scope: d.scope, cfg: d.cfg, New: configText(d.cfg, d.delete)}
		if exists {
			c.Old, c.Version = configText(cur, false), cur.Version
		}
		switch {
		case d.delete && exists:
			c.Action = "delete"
		case d.delete, exists && slices.Equal(c.Old, c.New):
			c.Action = "unchanged"
		case exists:
			c.Action = "update"
		default:
			c.Action = "create"
		}
		out = append(out, c)
	}
	return out, nil
}

// configText is a config as comparable text: its limits, its shadow
// limits, then the mode.
func configText(c tollgate.Config, none bool) []string {
	if none {
		return nil
	}
	out := api.FromConfig(c).Limits
	if len(c.Shadow) > 0 {
		out = append(out, "shadow="+strings.Join(slices.Sorted(slices.Values(c.Shadow)), ","))
	}
	if len(c.AlertAt) > 0 {
		out = append(out, "alert_at="+alertText(c.AlertAt, ","))
	}
	if c.OnUnavailable != "" {
		out = append(out, "on_unavailable="+string(c.OnUnavailable))
	}
	return out
}

// alertText is alert thresholds as text, joined by sep.
func alertText(at []float64, sep string) string {
	s := make([]string, len(at))
	for i, t := range at {
		s[i] = strconv.FormatFloat(t, 'g', -1, 64)
	}
	return strings.Join(s, sep)
}

// MissingEntitiesError reports entities a limits file gives limits to
// that do not exist.
type MissingEntitiesError struct{ IDs []string }

// Error names the entities and says that nothing was written.
func (e *MissingEntitiesError) Error() string {
	return fmt.Sprintf("the file sets limits of %d entit%s that do%s not exist: %s (create %s first with tollgate entity create); nothing was written",
		len(e.IDs), plural(len(e.IDs), "y", "ies"), plural(len(e.IDs), "es", ""), strings.Join(e.IDs, ", "), plural(len(e.IDs), "it", "them"))
}

// Unwrap makes the error match tollgate.ErrEntityNotFound.
func (e *MissingEntitiesError) Unwrap() error { return tollgate.ErrEntityNotFound }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// checkEntities fails with a *MissingEntitiesError naming every entity
// that desired sets (not deletes) limits of and that does not exist.
func checkEntities(ctx context.Context, pl *planes, desired []desiredScope) error {
	seen := map[string]bool{}
	var missing []string
	for _, d := range desired {
		id := d.scope.Entity
		if id == "" || d.delete || seen[id] {
			continue
		}
		seen[id] = true
		_, err := pl.adm.GetEntity(ctx, id)
		switch {
		case errors.Is(err, model.ErrEntityNotFound):
			missing = append(missing, id)
		case err != nil:
			return err
		}
	}
	if len(missing) > 0 {
		return &MissingEntitiesError{IDs: missing}
	}
	return nil
}

// ApplyError reports a write of apply that failed after others were made.
type ApplyError struct {
	Applied []string // the scopes written, in order
	Failed  string   // the scope whose write failed
	Err     error
}

// Error names the failed write, what was applied before it and how to
// resume: for a level changed since it was planned, by planning again.
func (e *ApplyError) Error() string {
	done := "none"
	if len(e.Applied) > 0 {
		done = strings.Join(e.Applied, "; ")
	}
	if errors.Is(e.Err, model.ErrPreconditionFailed) {
		return fmt.Sprintf("%s: changed by someone else since it was planned, not overwritten (%v); applied before it (%d): %s; nothing after it was written: plan again to see the change, then apply",
			e.Failed, e.Err, len(e.Applied), done)
	}
	return fmt.Sprintf("%s: %v; applied before it (%d): %s; nothing after it was written: run apply again to resume (the plan lists only what still differs)",
		e.Failed, e.Err, len(e.Applied), done)
}

// Unwrap returns the write's error.
func (e *ApplyError) Unwrap() error { return e.Err }

// apply writes the changes one after another (the store has no
// transaction across levels), each on the version of the level that was
// planned (precondition), so that a level someone else changed since is
// refused, not overwritten. The plan was checked first (plan); if a write
// fails anyway, the error says which were applied.
func (g *globals) apply(ctx context.Context, pl *planes, changes []change) error {
	p := newProgress(g.stderr, "applying", countChanges(changes))
	defer p.done()
	var applied []string
	for _, c := range changes {
		var err error
		switch c.Action {
		case "create", "update":
			err = pl.adm.SetLimits(ctx, c.scope, c.cfg, c.precondition(pl.who)...)
		case "delete":
			err = pl.adm.DeleteLimits(ctx, c.scope, c.precondition(pl.who)...)
		default:
			continue
		}
		if err != nil {
			return &ApplyError{Applied: applied, Failed: c.Action + " " + c.Scope, Err: err}
		}
		applied = append(applied, c.Action+" "+c.Scope)
		p.add()
	}
	return nil
}

func (g *globals) printPlan(changes []change, verb string) error {
	return g.printOut(changes, func(w *tabwriter.Writer) {
		row(w, "ACTION", "SCOPE", "STORED", "FILE")
		for _, c := range changes {
			if c.Action == "unchanged" && verb != "plan" {
				continue
			}
			row(w, c.Action, c.Scope, dash(strings.Join(c.Old, " ")), dash(strings.Join(c.New, " ")))
		}
		row(w, "", fmt.Sprintf("%d change(s)", countChanges(changes)), "", "")
	})
}
