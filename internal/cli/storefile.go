package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate/store/embedded"
)

// The commands on the embedded store's file: tollgate store check and
// tollgate backup. Both open the file themselves, so both need it free: a
// running tollgate serve holds its lock, and they fail after the lock
// timeout (embedded.DefaultLockTimeout) rather than wait for it.

func newStoreCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "store",
		Short:   "Check the embedded store's file",
		Example: "  tollgate store check --store embedded:tollgate.db",
	}
	cmd.AddCommand(newStoreCheckCmd(g))
	return cmd
}

// checkResult is what tollgate store check prints with -o json.
type checkResult struct {
	Path     string   `json:"path"`
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
}

func newStoreCheckCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Run the full consistency check of an embedded store file",
		Long: `Check the embedded store file of --store (embedded:PATH): its size against
what its last transaction wrote, every page of it (bbolt's consistency
check: page types, key order, every page used once or free), and every
bucket and lease record. It writes nothing. It prints ok, or each problem
found, and exits 0 if the file is sound, 1 if it is damaged or cannot be
checked.

tollgate serve runs the same check when it opens the file, and refuses a
damaged one; restore it from a backup (tollgate backup), or move it away
to start with an empty store.

The file must not be in use: a running tollgate serve holds it, and check
fails after ` + embedded.DefaultLockTimeout.String() + ` instead of waiting. Stop the server, or check a
backup of the file.`,
		Example: "  tollgate store check --store embedded:/var/lib/tollgate/tollgate.db",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			path, err := g.embeddedPath("store check")
			if err != nil {
				return err
			}
			err = embedded.Check(path)
			var de *embedded.DamagedError
			if err != nil && !errors.As(err, &de) {
				return fileErr(path, "check", err)
			}
			res := checkResult{Path: path, OK: de == nil, Problems: []string{}}
			if de != nil {
				res.Problems = de.Problems
			}
			if perr := g.printCheck(res); perr != nil {
				return perr
			}
			if de != nil {
				return reportedError{de}
			}
			return nil
		},
	}
}

func (g *globals) printCheck(res checkResult) error {
	return g.printOut(res, func(w *tabwriter.Writer) {
		if res.OK {
			fmt.Fprintf(w, "%s: ok\n", res.Path)
			return
		}
		fmt.Fprintf(w, "%s: damaged\n", res.Path)
		for _, p := range res.Problems {
			fmt.Fprintf(w, "  - %s\n", p)
		}
		fmt.Fprintln(w, "Restore it from a backup, or move it away to start with an empty store.")
	})
}

// backupResult is what tollgate backup prints with -o json.
type backupResult struct {
	Store  string `json:"store"`
	Backup string `json:"backup"`
	Bytes  int64  `json:"bytes"`
}

func newBackupCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Copy the embedded store to FILE, consistently and checked",
		Long: `Write a consistent copy of the embedded store of --store (embedded:PATH) to
FILE: the store is opened (and checked, as tollgate serve does: a damaged
store is refused), the copy is written to a temporary file beside FILE,
synced, checked in full (tollgate store check) and only then renamed onto
FILE, replacing an earlier backup there. A failed backup leaves FILE as it
was. To restore: stop the server, put the backup in place of the store
file, start it.

With --store the store must not be in use: a running tollgate serve holds
it, and backup fails after ` + embedded.DefaultLockTimeout.String() + ` instead of waiting. Back up a
running server through it instead, with --server URL (an admin key of every
namespace): the server over an embedded store streams a consistent copy
while it serves (GET /v1/backup), written to FILE as above, checked. A
program that embeds the store can back it up while serving with
(*embedded.Store).BackupFile (docs/embedded.md).`,
		Example: "  tollgate backup /backup/tollgate-$(date +%F).db --store embedded:/var/lib/tollgate/tollgate.db\n" +
			"  tollgate backup /backup/tollgate-$(date +%F).db --server http://127.0.0.1:8080",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if g.server != "" {
				return g.backupThroughServer(cmd.Context(), args[0])
			}
			path, err := g.embeddedPath("backup")
			if err != nil {
				return err
			}
			// Open would create a missing store: there is nothing to back up.
			if _, err := os.Stat(path); err != nil {
				return fileErr(path, "back up", err)
			}
			st, err := embedded.Open(path)
			if err != nil {
				return fileErr(path, "back up", err)
			}
			n, err := st.BackupFile(cmd.Context(), args[0])
			if err = errors.Join(err, st.Close()); err != nil {
				return err
			}
			res := backupResult{Store: path, Backup: args[0], Bytes: n}
			return g.printOut(res, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "%s: backed up to %s (%d bytes, checked)\n", path, args[0], n)
			})
		},
	}
}

// backupThroughServer writes the server's copy of its store file to
// path, checked (embedded.WriteBackupFile).
func (g *globals) backupThroughServer(ctx context.Context, path string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	n, err := embedded.WriteBackupFile(path, func(w io.Writer) (int64, error) { return c.Backup(ctx, w) })
	if err != nil {
		return err
	}
	res := backupResult{Store: g.server, Backup: path, Bytes: n}
	return g.printOut(res, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%s: backed up to %s (%d bytes, checked)\n", g.server, path, n)
	})
}

// embeddedPath returns the file of the embedded store the global flags
// name (DefaultStore without --store), for command, which works on the
// file itself.
func (g *globals) embeddedPath(command string) (string, error) {
	if g.server != "" {
		return "", usagef("%s works on the store file (--store embedded:PATH), not through a server (--server)", command)
	}
	raw := g.store
	if raw == "" {
		raw = DefaultStore
	}
	spec, err := parseStoreURL(raw)
	if err != nil {
		return "", err
	}
	if spec.kind != "embedded" {
		return "", usagef("%s works on an embedded store (--store embedded:PATH), not %s", command, raw)
	}
	return spec.path, nil
}

// fileErr explains an error of opening the store file at path to do what.
func fileErr(path, what string, err error) error {
	switch {
	case errors.Is(err, embedded.ErrLocked):
		return fmt.Errorf("cannot %s %s: it is in use by another process (a running tollgate serve?); stop it first: %w", what, path, err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cannot %s %s: there is no store file there", what, path)
	case errors.Is(err, embedded.ErrDamaged):
		return err
	}
	return fmt.Errorf("cannot %s %s: %w", what, path, err)
}
