package cli

import (
	"context"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionText(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return append(s, debug.BuildSetting{Key: "GOOS", Value: runtime.GOOS})
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"release", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.0"},
			Settings: vcs("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-01-02T15:04:05Z", "vcs.modified", "false")},
			true, "sudoku v1.2.0\nrevision " + rev + "\ntime     2026-01-02T15:04:05Z\ngo       go1.26.0" + platform},
		{"modified checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20260102150405-0123456789ab+dirty"},
			Settings: vcs("vcs.revision", rev, "vcs.time", "2026-01-02T15:04:05Z", "vcs.modified", "true")},
			true, "sudoku v0.0.0-20260102150405-0123456789ab+dirty\nrevision " + rev + " (modified)\ntime     2026-01-02T15:04:05Z\ngo       go1.26.0" + platform},
		{"devel without version control information", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs()},
			true, "sudoku (devel)\nrevision unknown (built without version control information)\ntime     unknown\ngo       go1.26.0" + platform},
		{"a revision without a time", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.revision", rev)},
			true, "sudoku (devel)\nrevision " + rev + "\ntime     unknown\ngo       go1.26.0" + platform},
		{"no version (a test binary)", &debug.BuildInfo{}, true,
			"sudoku (devel)\nrevision unknown (built without version control information)\ntime     unknown\ngo       " + runtime.Version() + platform},
		{"no build information", nil, false,
			"sudoku (devel)\nrevision unknown (built without version control information)\ntime     unknown\ngo       " + runtime.Version() + platform},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionText(tt.bi, tt.ok); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestVersionCommand(t *testing.T) {
	want := versionText(debug.ReadBuildInfo())
	if !strings.HasPrefix(want, "sudoku ") || !strings.Contains(want, "\ngo       "+runtime.Version()+" ") {
		t.Errorf("version text %q lacks the version or the Go version", want)
	}
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}} {
		code, stdout, stderr := run(t, context.Background(), "", args...)
		if code != ExitOK || stdout != want || stderr != "" {
			t.Errorf("%v: exit status %d, stdout %q, stderr %q; want 0 and %q", args, code, stdout, stderr, want)
		}
	}
	code, _, stderr := run(t, context.Background(), "", "version", "extra")
	if code != ExitUsage || !strings.Contains(stderr, "unknown command") && !strings.Contains(stderr, "accepts 0 arg") {
		t.Errorf("version with an argument: exit status %d, stderr %q; want a usage error", code, stderr)
	}
}
