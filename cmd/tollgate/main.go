// Command tollgate is Tollgate's server and command-line tool; run
// "tollgate help" for its commands.
package main

import (
	"context"
	"os"

	"github.com/tollgate-rl/tollgate/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
