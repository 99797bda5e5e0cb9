package cli

import (
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// version, when set at link time (-ldflags "-X
// github.com/tollgate-rl/tollgate/internal/cli.version=v1.2.3", as make
// image does), is the version reported instead of the module's.
var version string

// buildInfo is what tollgate version reports.
type buildInfo struct {
	Version  string `json:"version"`            // the module version, "(devel)" for a build from a checkout
	Revision string `json:"revision,omitempty"` // the VCS commit, "-dirty" when built with changes
	Time     string `json:"time,omitempty"`     // the commit's time
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// readBuildInfo reads the binary's own build information.
func readBuildInfo() buildInfo {
	b := buildInfo{Version: "(unknown)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Version = info.Main.Version
	if version != "" {
		b.Version = version
	}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && b.Revision != "" {
		b.Revision += "-dirty"
	}
	return b
}

// String is the one line --version prints.
func (b buildInfo) String() string {
	s := "tollgate " + b.Version
	if b.Revision != "" {
		s += " (" + b.Revision
		if b.Time != "" {
			s += ", " + b.Time
		}
		s += ")"
	}
	return s + " " + b.Go + " " + b.Platform
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version of this binary",
		Example: "  tollgate version\n  tollgate --version\n  tollgate version -o json",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			b := readBuildInfo()
			return g.printOut(b, func(w *tabwriter.Writer) {
				_, _ = w.Write([]byte(b.String() + "\n"))
			})
		},
	}
}
