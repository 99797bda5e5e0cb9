package cli

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// dynamoStore opens the DynamoDB table of --store for the table commands
// and the stream aggregator.
func (g *globals) dynamoStore(ctx context.Context) (*dynamodb.Store, error) {
	if g.store == "" {
		return nil, usagef("--store dynamodb://TABLE?region=R is required")
	}
	spec, err := parseStoreURL(g.store)
	if err != nil {
		return nil, err
	}
	if spec.kind != "dynamodb" {
		return nil, usagef("--store %s: this command works on a DynamoDB table (dynamodb://TABLE); a %s store needs no table, and tollgate serve records its usage itself", g.store, spec.kind)
	}
	return openDynamoDB(ctx, spec, g.storeTimeout)
}

func newDeployCmd(g *globals) *cobra.Command {
	var sf stackFlags
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Create the DynamoDB table, or print or deploy the CloudFormation stack of Tollgate on AWS",
		Long: `Create the DynamoDB table named by --store and wait until it is active.
An existing table with the right schema is left as it is; one created
by other tools (the CloudFormation stack) without Tollgate's schema version
record is checked and initialised. A table of schema 1 (Tollgate before
bucket items held full ticks) is upgraded in place; stop every process of
the older version first, as it cannot read the buckets this version writes
(they are converted as they are next written). Items older versions wrote
are migrated, each run moving what is left: audit events get the index
entry the export reads, and namespace index entries move to their parts
(docs/dynamodb.md 4.17; roll out, stop the older processes, then deploy).

--emit cloudformation prints the template of the whole deployment (table,
aggregator and reconciler Lambda functions, alarms, IAM policies), with
the parameter flags as its defaults; --stack NAME creates or updates that
stack through the CloudFormation API, then initialises its table.
docs/operations.md describes both.`,
		Example: `  tollgate deploy --store 'dynamodb://tollgate?region=eu-west-1'
  tollgate deploy --store 'dynamodb://tollgate?endpoint=http://127.0.0.1:8000'
  tollgate deploy --emit cloudformation --lambda-code-s3-bucket my-artifacts --alarm-email oncall@example.com > tollgate.json
  tollgate deploy --stack tollgate --region eu-west-1 --lambda-code-s3-bucket my-artifacts --namespace-id 3f9a0c1d2e4b5a67`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if on, err := sf.cloudFormation(cmd); err != nil || on {
				if err != nil {
					return err
				}
				return sf.runCloudFormation(cmd, g)
			}
			ctx := cmd.Context()
			st, err := g.dynamoStore(ctx)
			if err != nil {
				return err
			}
			admin := st.Admin()
			verb := "deployed"
			switch err := admin.CheckTable(ctx); {
			case err == nil:
				fmt.Fprintf(g.stdout, "table %s already deployed (schema %d)\n", st.Table(), dynamodb.SchemaVersion)
				return reindexAudit(ctx, g, admin)
			case errors.Is(err, dynamodb.ErrSchemaUpgradable):
				verb = "upgraded"
			case errors.Is(err, dynamodb.ErrSchemaUnversioned):
				verb = "initialised" // made by CloudFormation or Terraform
			case !errors.Is(err, dynamodb.ErrTableNotFound):
				return err
			}
			init := admin.CreateTable
			if verb == "initialised" {
				init = admin.InitTable // checks the layout first; needs no CreateTable permission
			}
			if err := init(ctx); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "table %s %s (schema %d)\n", st.Table(), verb, dynamodb.SchemaVersion)
			return reindexAudit(ctx, g, admin)
		},
	}
	addStackFlags(cmd, &sf)
	return cmd
}

// reindexAudit migrates what an older Tollgate wrote: it gives its audit
// events the index entry the namespace-wide log reads (tollgate audit
// export, retention), then moves every item's namespace index entry from
// the bare namespace id to its part (docs/dynamodb.md 2.3, 4.17), and says
// how many it changed, if any. Both are idempotent and resumable.
func reindexAudit(ctx context.Context, g *globals, admin *dynamodb.Admin) error {
	n, err := admin.ReindexAudit(ctx)
	if n > 0 {
		fmt.Fprintf(g.stdout, "audit events reindexed for export: %d\n", n)
	}
	if err != nil {
		return err
	}
	n, err = admin.ReindexNamespaceIndex(ctx)
	if n > 0 {
		fmt.Fprintf(g.stdout, "namespace index entries spread over %d parts: %d\n", dynamodb.NamespaceIndexParts, n)
	}
	return err
}

func newDestroyCmd(g *globals) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:     "destroy",
		Short:   "Delete the DynamoDB table and everything in it",
		Example: "  tollgate destroy --store 'dynamodb://tollgate?region=eu-west-1' --yes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				return usagef("this deletes every limit, entity and bucket in the table: confirm with --yes")
			}
			ctx := cmd.Context()
			st, err := g.dynamoStore(ctx)
			if err != nil {
				return err
			}
			if err := st.Admin().DeleteTable(ctx); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "table %s deleted\n", st.Table())
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm the deletion")
	return cmd
}

// tableStatus is what status reports.
type tableStatus struct {
	Table         string `json:"table"`
	Reachable     bool   `json:"reachable"`
	LatencyMS     int64  `json:"latency_ms"`
	Status        string `json:"status,omitempty"`
	SchemaVersion int64  `json:"schema_version"`
	SchemaOK      bool   `json:"schema_ok"`
	ItemCount     int64  `json:"item_count"`
	SizeBytes     int64  `json:"size_bytes"`
	Stream        string `json:"stream,omitempty"`
	Error         string `json:"error,omitempty"`
}

func newStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Check the DynamoDB table: connectivity, latency, schema, item counts",
		Long: `Describe the table named by --store. Item counts and sizes are DynamoDB's
estimates, refreshed about every six hours. Exits 1 if the table cannot be
reached or has another schema.`,
		Example: "  tollgate status --store 'dynamodb://tollgate?region=eu-west-1' -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, err := g.dynamoStore(ctx)
			if err != nil {
				return err
			}
			admin := st.Admin()
			s := tableStatus{Table: st.Table()}
			start := time.Now()
			d, err := admin.DescribeTable(ctx)
			s.LatencyMS = time.Since(start).Milliseconds()
			if err == nil {
				s.Reachable = true
				s.Status, s.SchemaVersion, s.ItemCount, s.SizeBytes, s.Stream = d.Status, d.SchemaVersion, d.ItemCount, d.SizeBytes, d.StreamARN
				err = admin.CheckTable(ctx)
				s.SchemaOK = err == nil
			}
			if err != nil {
				s.Error = err.Error()
			}
			if perr := g.printOut(s, func(w *tabwriter.Writer) {
				row(w, "TABLE", "REACHABLE", "LATENCY", "STATUS", "SCHEMA", "ITEMS", "BYTES")
				schema := fmt.Sprintf("%d", s.SchemaVersion)
				if !s.SchemaOK {
					schema += fmt.Sprintf(" (want %d)", dynamodb.SchemaVersion)
				}
				row(w, s.Table, s.Reachable, fmt.Sprintf("%dms", s.LatencyMS), dash(s.Status), schema, s.ItemCount, s.SizeBytes)
			}); perr != nil {
				return perr
			}
			if err != nil {
				return reportedError{err}
			}
			return nil
		},
	}
}
