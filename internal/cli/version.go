package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func init() { addCommand(newVersionCmd) }

// newVersionCmd returns the sudoku version command; the root command's
// --version flag prints the same.
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the source revision and the Go version of this binary",
		Long: `Print the version of sudoku, the version control revision and time it
was built from, and the Go version that built it, as recorded in the
binary (the same as 'sudoku --version'). A binary built from a checkout
rather than a release has version (devel); one built without version
control information says so.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionText(debug.ReadBuildInfo()))
			return err
		},
	}
}

// versionText formats what the build recorded (bi, when ok), one item a
// line:
//
//	sudoku v1.2.0
//	revision 0123abcd... (modified)
//	time     2026-01-02T15:04:05Z
//	go       go1.26.0 linux/amd64
//
// The version is (devel) for a build from a checkout, the revision and
// time "unknown" for a build without version control information.
func versionText(bi *debug.BuildInfo, ok bool) string {
	version, goVersion := "", runtime.Version()
	settings := map[string]string{}
	if ok && bi != nil {
		version = bi.Main.Version
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
	}
	if version == "" {
		version = "(devel)" // a test binary, or no build information at all
	}
	revision, when := "unknown", "unknown"
	if r := settings["vcs.revision"]; r != "" {
		revision = r
		if settings["vcs.modified"] == "true" {
			revision += " (modified)"
		}
	}
	if t := settings["vcs.time"]; t != "" {
		when = t
	}
	if revision == "unknown" && when == "unknown" {
		revision = "unknown (built without version control information)"
		when = "unknown"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "sudoku %s\n", version)
	fmt.Fprintf(&b, "revision %s\n", revision)
	fmt.Fprintf(&b, "time     %s\n", when)
	fmt.Fprintf(&b, "go       %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}
