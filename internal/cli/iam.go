package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate/deploy"
)

func newIAMCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "iam", Short: "Print the IAM policies of Tollgate's personas (acquire, admin, worker)",
		Example: `  tollgate iam policy --persona acquire --namespace-id 3f9a0c1d2e4b5a67 --table arn:aws:dynamodb:eu-west-1:123456789012:table/tollgate
  tollgate iam policy --persona worker --table arn:aws:dynamodb:eu-west-1:123456789012:table/tollgate
  tollgate iam boundary --namespace-id 3f9a0c1d2e4b5a67 --table arn:aws:dynamodb:eu-west-1:123456789012:table/tollgate`}
	var opts deploy.PolicyOptions
	var persona string
	policy := &cobra.Command{
		Use:   "policy",
		Short: "Print the IAM policy document of a persona",
		Long: `Print, as JSON, the IAM policy document a persona needs on the tables:

  acquire  an application's runtime: acquire, leases, reservations,
           availability, capacity
  admin    entities, limits, audit, usage; without --namespace-id the
           operator (every namespace, the registry, tollgate deploy and
           status; not DeleteTable)
  worker   the aggregator and the reconciler (process or Lambda): the
           stream and every namespace

With --namespace-id (the id, from tollgate namespace show NAME; repeat for
several), acquire and admin reach only those namespaces' items
(dynamodb:LeadingKeys on the keys' prefix) and may read the registry
partition. docs/operations.md, "IAM".`,
		Example: `  tollgate iam policy --persona acquire --namespace-id 3f9a0c1d2e4b5a67 --table arn:aws:dynamodb:eu-west-1:123456789012:table/tollgate
  tollgate iam policy --persona admin --table arn:aws:dynamodb:eu-west-1:123456789012:table/tollgate > operator.json
  tollgate iam policy --persona worker --table arn:aws:dynamodb:eu-west-1:123456789012:table/tollgate`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			p := deploy.Persona(persona)
			if !isPersona(p) {
				return usagef("--persona %q: want %s", persona, personaList())
			}
			return printPolicy(g, func() (deploy.Document, error) { return deploy.PolicyDocument(p, opts) })
		},
	}
	boundary := &cobra.Command{
		Use:   "boundary",
		Short: "Print a permissions boundary confining roles to namespaces",
		Long: `Print, as JSON, a permissions boundary for the roles of the tenants of
--namespace-id: the most any policy attached to them can grant on the
tables (the admin persona confined to those namespaces, which includes the
acquire persona). Set it as the PermissionsBoundary of the roles a tenant
team may create.`,
		Example: `  tollgate iam boundary --namespace-id 3f9a0c1d2e4b5a67 --table arn:aws:dynamodb:eu-west-1:123456789012:table/tollgate > boundary.json
  aws iam create-policy --policy-name tollgate-acme-boundary --policy-document file://boundary.json`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			return printPolicy(g, func() (deploy.Document, error) { return deploy.BoundaryDocument(opts) })
		},
	}
	policy.Flags().StringVar(&persona, "persona", "", "acquire, admin or worker")
	_ = policy.MarkFlagRequired("persona")
	for _, c := range []*cobra.Command{policy, boundary} {
		c.Flags().StringSliceVar(&opts.Tables, "table", nil, "a table's ARN, arn:aws:dynamodb:REGION:ACCOUNT:table/NAME (repeat or comma-separate for several; the stack's TableArn output)")
		c.Flags().StringSliceVar(&opts.NamespaceIDs, "namespace-id", nil, "confine to this namespace id (repeat or comma-separate for several)")
		_ = c.MarkFlagRequired("table")
		cmd.AddCommand(c)
	}
	return cmd
}

func isPersona(p deploy.Persona) bool {
	for _, q := range deploy.Personas() {
		if p == q {
			return true
		}
	}
	return false
}

func personaList() string {
	var s []string
	for _, p := range deploy.Personas() {
		s = append(s, string(p))
	}
	return strings.Join(s, ", ")
}

// printPolicy prints the document make returns; its bad options are
// usage errors naming the flag.
func printPolicy(g *globals, build func() (deploy.Document, error)) error {
	doc, err := build()
	var ie *deploy.InvalidOptionError
	if errors.As(err, &ie) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(g.stdout, "%s\n", b)
	return err
}
