package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/server"
)

func newKeysCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Manage API keys: stored in the store (create, list, revoke), or lines of a keys file (new)",
		Long: `API keys authenticate requests to tollgate serve. Keys kept in the store
(create, list, revoke) are honoured by every server over the store, and a
revoked one is refused by all of them within their refresh interval; a
server without --keys authenticates as soon as the store holds one. A keys
file (new) is read once at start: keep it for the first admin key.

On a store (--store) these commands need no key; through a server
(--server) they need an admin key of the namespace (--api-key).`,
		Example: `  tollgate keys create --name checkout --role acquire --entity org-1 --expires-in 90d
  tollgate keys list
  tollgate keys revoke checkout
  tollgate keys new --name ops --role admin -n '*' >> keys.txt`}
	cmd.AddCommand(newKeysCreateCmd(g), newKeysListCmd(g), newKeysRevokeCmd(g), newKeysNewCmd(g))
	return cmd
}

func newKeysCreateCmd(g *globals) *cobra.Command {
	var spec tollgate.KeySpec
	var role string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a stored API key of the namespace and print its secret (shown once)",
		Long: `Create an API key of the namespace (-n), kept in the store as a hash, and
print its secret: the store does not keep it, so this is the only time it
is shown. --entity confines the key to an entity and its descendants;
--allow-limits lets it send its own limits (admin keys may anyway);
--expires-in makes it stop working after a while. The creation is
recorded in the audit log. -o json prints the created key's object,
secret in "key".`,
		Example: `  tollgate keys create --name checkout --role acquire
  tollgate keys create --name org-1-reader --role read --entity org-1 --expires-in 30d -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec.Role = model.Role(role)
			if err := spec.Role.Validate(); err != nil {
				return usageError{err}
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				secret, k, err := pl.adm.CreateKey(ctx, spec, pl.who...)
				if err != nil {
					return err
				}
				return g.printOut(api.CreatedKey{Secret: secret, KeyInfo: api.FromKey(k)}, func(w *tabwriter.Writer) {
					printKeyRows(w, []tollgate.Key{k})
					fmt.Fprintf(w, "\nAPI key (shown once): %s\n", secret)
				})
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&spec.Name, "name", "", "the key's name, unique in the namespace: the principal of its changes (required)")
	fl.StringVar(&role, "role", "acquire", "acquire, read or admin")
	fl.StringVar(&spec.Entity, "entity", "", "confine the key to this entity and its descendants")
	fl.BoolVar(&spec.AllowLimits, "allow-limits", false, "let the key send its own limits and a looser unavailable mode")
	daysVar(fl, &spec.ExpiresIn, "expires-in", 0, "how long the key works, e.g. 90d (default: until revoked)")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newKeysListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the stored API keys of the namespace (never their secrets)",
		Example: "  tollgate keys list\n  tollgate keys list -n team-a -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				ks, err := allPages(func(after string) ([]tollgate.Key, string, error) {
					ks, err := pl.adm.Keys(ctx, after, model.MaxKeyPage)
					next := ""
					if len(ks) == model.MaxKeyPage {
						next = ks[len(ks)-1].Name
					}
					return ks, next, err
				})
				if err != nil {
					return err
				}
				out := api.KeysResponse{Keys: make([]api.KeyInfo, len(ks))}
				for i, k := range ks {
					out.Keys[i] = api.FromKey(k)
				}
				return g.printOut(out, func(w *tabwriter.Writer) { printKeyRows(w, ks) })
			})
		},
	}
}

func newKeysRevokeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "revoke NAME",
		Short:   "Revoke a stored API key: every server refuses it within its refresh interval",
		Example: "  tollgate keys revoke checkout\n  tollgate keys revoke org-1-reader -n team-a --server http://127.0.0.1:8080 --api-key $ADMIN_KEY",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				if err := pl.adm.RevokeKey(ctx, args[0], pl.who...); err != nil {
					return err
				}
				fmt.Fprintf(g.stderr, "revoked %s\n", args[0])
				return nil
			})
		},
	}
}

// printKeyRows writes a table of keys.
func printKeyRows(w *tabwriter.Writer, ks []tollgate.Key) {
	row(w, "NAME", "ROLE", "ENTITY", "ALLOW LIMITS", "CREATED", "EXPIRES")
	for _, k := range ks {
		expires := "never"
		if !k.ExpiresAt.IsZero() {
			expires = stamp(k.ExpiresAt)
		}
		row(w, k.Name, k.Role, dash(k.Entity), k.AllowLimits, stamp(k.CreatedAt), expires)
	}
}

func newKeysNewCmd(g *globals) *cobra.Command {
	var role, name, entity string
	var allowLimits bool
	cmd := &cobra.Command{
		Use:   "new",
		Short: "Print a new API key and the line to add to a keys file",
		Long: `Print a new random API key (give it to the client) and the keys-file line
that grants it (add it to the file passed to tollgate serve --keys). The
server keeps only the hash. Nothing is written to a store: for keys every
server honours and that can be revoked, see tollgate keys create.`,
		Example: `  tollgate keys new --name checkout --role acquire -n default >> keys.txt
  tollgate keys new --name ops --role admin -n '*'`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := model.Role(role).Validate(); err != nil {
				return usagef("--role %q: want acquire, read or admin", role)
			}
			if g.namespace != server.AnyNamespace {
				if err := model.ValidateNamespace(g.namespace); err != nil {
					return usageError{err}
				}
			}
			if name == "" || strings.ContainsAny(name, " \t") {
				return usagef("--name: want one word naming the key's holder")
			}
			line := []string{"", g.namespace, role, name}
			if entity != "" {
				if err := model.ValidateEntityID(entity); err != nil {
					return usageError{err}
				}
				line = append(line, "entity="+entity)
			}
			if allowLimits {
				line = append(line, "allow_limits")
			}
			key, hash := server.GenerateKey()
			line[0] = hash
			fmt.Fprintf(g.stderr, "API key (shown once): %s\n", key)
			fmt.Fprintln(g.stdout, strings.Join(line, " "))
			return nil
		},
	}
	cmd.Flags().StringVar(&role, "role", "acquire", "acquire, read or admin")
	cmd.Flags().StringVar(&name, "name", "", "who holds the key (recorded in the audit log)")
	cmd.Flags().StringVar(&entity, "entity", "", "confine the key to this entity and its descendants")
	cmd.Flags().BoolVar(&allowLimits, "allow-limits", false, "let the key send its own limits")
	return cmd
}
