// Package cli is the `tollgate` command: the server, table management and
// the operator commands, built with cobra. Main is the whole program, so
// tests run it in-process with their own arguments and writers.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// Exit codes.
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitUsage       = 2
	ExitRateLimited = 3
)

// Environment variables that stand for the global flags.
const (
	EnvStore     = "TOLLGATE_STORE"
	EnvServer    = "TOLLGATE_SERVER"
	EnvNamespace = "TOLLGATE_NAMESPACE"
	EnvAPIKey    = "TOLLGATE_API_KEY"
)

// DefaultStore is the store of every command without --store or --server.
const DefaultStore = "embedded:tollgate.db"

// longCallTimeout is the default --timeout of commands that make one long
// call to the server (namespace purge): a little more than the server
// allows itself, so that the server's answer, not ours, ends the wait.
const longCallTimeout = server.PurgeTimeout + time.Minute

// annotationLong marks a command that gets longCallTimeout by default.
const annotationLong = "tollgate.long"

// globals are the flags every command shares.
type globals struct {
	store      string
	server     string
	serverFlag bool // --server was given on the command line
	namespace  string
	apiKey     string
	output     string        // "table" or "json"
	timeout    time.Duration // of each call to --server; 0: none
	// storeTimeout bounds each call to a DynamoDB store
	// (dynamodb.WithCallTimeout); 0: none.
	storeTimeout time.Duration

	stdin          io.Reader
	stdout, stderr io.Writer
	log            *slog.Logger
}

// usageError marks an error as bad usage (exit code 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// reportedError marks a failure the command's output already describes
// (diff's drift, status's unreachable table): with -o json, Main prints no
// error object after that output.
type reportedError struct{ error }

func (e reportedError) Unwrap() error { return e.error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// Main runs the tollgate command with args (without the program name) and
// returns its exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(stderr, "tollgate:", err)
	code := exitCode(err)
	var done reportedError
	if g.output == "json" && !errors.As(err, &done) {
		g.printError(err, code)
	}
	return code
}

// printError writes err to standard output as a JSON object shaped like
// the HTTP API's error bodies (api.Error), for scripts using -o json: the
// stable code, the message and, depending on the code, field, value and
// reason, or retry_after_ms and limits.
func (g *globals) printError(err error, code int) {
	_, body := api.ErrorBody(err)
	body.Message = err.Error()
	if code == ExitUsage && body.Code != api.CodeInvalidArgument {
		body.Code, body.Reason = api.CodeInvalidArgument, "usage"
	}
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(body)
}

func exitCode(err error) int {
	var ue usageError
	switch {
	case errors.As(err, &ue), isCobraUsage(err):
		return ExitUsage
	case errors.Is(err, model.ErrRateLimited):
		return ExitRateLimited
	}
	return ExitFailure
}

// isCobraUsage recognises cobra's own argument and flag errors, which it
// returns as plain errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument",
		"invalid argument", "accepts ", "requires at least", "requires at most", "required flag", "if any flags in the group", "at least one of the flags in the group"} {
		if strings.HasPrefix(msg, p) || strings.Contains(msg, " "+p) {
			return true
		}
	}
	return false
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "tollgate",
		Short: "Distributed rate limiter and quota broker",
		Long: `Tollgate enforces token-bucket rate limits, concurrency limits and
reservations for entities in a hierarchy (API key -> project -> org).

Commands work on a store directly (--store, default ` + DefaultStore + `)
or through a running server (--server URL). A flag given on the command
line beats its environment variable (` + EnvStore + `, ` + EnvServer + `,
` + EnvNamespace + `, ` + EnvAPIKey + `).

Exit codes: 0 ok, 1 failure, 2 usage error, 3 rate-limited (acquire).
With -o json, results and errors are JSON on standard output; errors have
the HTTP API's error shape ({"error": CODE, "message": ..., ...}).`,
		Example: `  tollgate serve
  tollgate entity create org-1 --server http://127.0.0.1:8080
  tollgate acquire -e key-1 -r api -c rpm=1 -l rpm:100/min -o json`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.resolve(cmd)
		},
	}
	f := root.PersistentFlags()
	f.StringVar(&g.store, "store", "", "store URL: embedded:PATH, memory:, dynamodb://TABLE?region=R&endpoint=URL, redis://[USER:PASS@]HOST:PORT[/DB], rediss://..., redis+cluster://HOST:PORT,... (env "+EnvStore+"; default "+DefaultStore+")")
	f.StringVar(&g.server, "server", "", "work through a Tollgate server at this URL instead of a store (env "+EnvServer+")")
	f.StringVarP(&g.namespace, "namespace", "n", "", "namespace (env "+EnvNamespace+"; default \"default\")")
	f.StringVar(&g.apiKey, "api-key", "", "API key for --server (env "+EnvAPIKey+")")
	f.StringVarP(&g.output, "output", "o", "table", "output format: table or json")
	f.DurationVar(&g.timeout, "timeout", client.DefaultTimeout, "how long one call to --server may take, 0 for no limit (long operations such as namespace purge default to "+longCallTimeout.String()+")")
	f.DurationVar(&g.storeTimeout, "store-timeout", dynamodb.DefaultCallTimeout, "how long one call to a DynamoDB or Redis store may take, its retries included, before on_unavailable decides; 0 for no limit")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, add := range commands {
		root.AddCommand(add(g))
	}
	root.Version = readBuildInfo().String()
	root.SetVersionTemplate("{{.Version}}\n")
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command that only groups others
// (tollgate limits, tollgate entity, ...) fail on an argument that names
// none of them: cobra would print the group's help and exit 0, so a
// mistyped "tollgate limits export" looked like success in a script.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if cmd.Runnable() || !cmd.HasSubCommands() || !cmd.HasParent() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unknown command %q for %q; see %q", args[0], cmd.CommandPath(), cmd.CommandPath()+" --help")
		}
		return cmd.Help()
	}
}

// commands lists the constructors of the subcommands, in help order.
var commands = []func(*globals) *cobra.Command{
	newServeCmd, newAcquireCmd, newAvailableCmd,
	newEntityCmd, newLimitsCmd, newReservationsCmd, newLeasesCmd, newPenalizeCmd, newResetCmd, newEventsCmd, newNamespaceCmd, newAuditCmd, newUsageCmd, newCapacityCmd, newKeysCmd,
	newDeployCmd, newStatusCmd, newDestroyCmd, newIAMCmd, newLocalCmd, newBenchCmd, newAggregatorCmd, newReconcileCmd,
	newStoreCmd, newBackupCmd,
	newVersionCmd,
}

// resolve fills unset flags from the environment and checks them. A flag
// given on the command line always beats the environment.
func (g *globals) resolve(cmd *cobra.Command) error {
	fromEnv := func(v *string, flag, name string) {
		if !cmd.Flags().Changed(flag) {
			*v = os.Getenv(name)
		}
	}
	fromEnv(&g.namespace, "namespace", EnvNamespace)
	fromEnv(&g.apiKey, "api-key", EnvAPIKey)
	if g.namespace == "" {
		g.namespace = model.DefaultNamespace
	}
	if err := g.resolveTarget(cmd.Flags().Changed("store"), cmd.Flags().Changed("server")); err != nil {
		return err
	}
	if g.timeout < 0 {
		return usagef("--timeout %v: want a positive duration, or 0 for no limit", g.timeout)
	}
	if cmd.Annotations[annotationLong] != "" && !cmd.Flags().Changed("timeout") {
		g.timeout = longCallTimeout
	}
	switch g.output {
	case "table", "json":
	default:
		return usagef("--output %q: want table or json", g.output)
	}
	if g.log == nil {
		g.log = slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return nil
}

// resolveTarget picks between a store and a server. --store and --server
// exclude each other; either one, given explicitly, sets aside both
// environment variables; with neither, the environment may name one of
// them, not both.
func (g *globals) resolveTarget(storeFlag, serverFlag bool) error {
	g.serverFlag = serverFlag
	switch {
	case storeFlag && serverFlag:
		return usagef("--store and --server exclude each other")
	case storeFlag:
		g.server = ""
	case serverFlag:
		g.store = ""
	default:
		g.store, g.server = os.Getenv(EnvStore), os.Getenv(EnvServer)
		if g.store != "" && g.server != "" {
			return usagef("%s and %s are both set: unset one, or choose with --store or --server", EnvStore, EnvServer)
		}
	}
	return nil
}
