package docs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A command of the README is a line of a ```sh (or bash, shell) block, or
// a "$ " line of a ```console block, with `\` continuations joined, its
// trailing "# comment" and "&" removed and its spaces collapsed. Every one
// must be in readmeRun (the test runs it) or in readmeNotRun (with the
// reason it is not run). To document a new command, add a line to one of
// them, the command written as the README has it (without its comment):
//
//	{cmd: "sudoku job cancel nonsense", exit: 2, check: ...},       // in readmeRun
//	{"sudoku submit --priority high FILE", "FILE is a placeholder"}, // in readmeNotRun

// readmeRun are the README's commands TestReadmeCommands runs, in a
// folder that mirrors the repository (every top-level entry linked, so
// that what a command writes stays there), with that folder first on
// PATH: the `sudoku` of these commands is the binary that `go build -o
// sudoku ./cmd/sudoku` made there. They run in the README's order.
var readmeRun = []struct {
	cmd  string
	exit int // the exit status it must end with
	// check, when set, checks the command's standard output.
	check func(t *testing.T, dir, stdout string)
}{
	{cmd: "go build -o sudoku ./cmd/sudoku", check: func(t *testing.T, dir, _ string) {
		if _, err := os.Stat(filepath.Join(dir, "sudoku")); err != nil {
			t.Errorf("no binary: %v", err)
		}
	}},
	{cmd: "go run ./cmd/sudoku solve examples/puzzles.txt", check: func(t *testing.T, dir, stdout string) {
		checkSameAsLocal(t, dir, "examples/puzzles.txt", stdout)
	}},
	{cmd: "sudoku --help", check: checkHelp},
	{cmd: "sudoku version", check: func(t *testing.T, _, stdout string) {
		if !strings.HasPrefix(stdout, "sudoku ") || !strings.Contains(stdout, "\ngo ") {
			t.Errorf("version prints %q, want the module version and the Go version", stdout)
		}
	}},
	{cmd: "sudoku solve --local examples/puzzles.txt", check: func(t *testing.T, _, stdout string) {
		checkSolutions(t, stdout, countPuzzles(t, "examples/puzzles.txt"))
	}},
	{cmd: "sudoku gen --from examples/puzzles.txt -n 100000 > puzzles.txt", check: func(t *testing.T, dir, _ string) {
		b, err := os.ReadFile(filepath.Join(dir, "puzzles.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n != 100000 {
			t.Errorf("puzzles.txt has %d lines, want 100000", n)
		}
	}},
}

// readmeNotRun are the README's commands the test does not run, each with
// the reason and, where there is one, the test that covers what it does.
var readmeNotRun = []struct{ cmd, why string }{
	{"go install ./cmd/sudoku", "installs into $(go env GOPATH)/bin, outside the repository; the same build as `go build -o sudoku ./cmd/sudoku`, which is run"},
	{"go test -race -count=1 ./...", "the test suite itself, this test included (.ci/run runs it)"},
	{`nats-server -js -sd /var/lib/nats --user sudoku --pass "$NATS_PASSWORD"`, "starts a server for good on the default port, which the shared test server holds; tests start private ones (internal/testenv), with authentication in internal/e2e's TestAuthentication"},
	{`redis-server --bind 0.0.0.0 --requirepass "$REDIS_PASSWORD" --maxmemory 1gb --maxmemory-policy allkeys-lru`, "starts a server for good on the default port, which the shared test server holds; tests start private ones (internal/testenv), with a password in TestAuthentication"},
	{`export SUDOKU_NATS_URL=nats://q:4222 SUDOKU_NATS_USER=sudoku SUDOKU_NATS_PASSWORD="$NATS_PASSWORD"`, "names a host of the example deployment; the environment variables are checked by internal/config's tests"},
	{`export SUDOKU_REDIS_ADDRS=q:6379 SUDOKU_REDIS_PASSWORD="$REDIS_PASSWORD"`, "names a host of the example deployment; the environment variables are checked by internal/config's tests"},
	{"sudoku worker --metrics-addr 0.0.0.0:9090", "runs until stopped, on the default queue of the servers it finds; internal/cli, internal/metrics and internal/reliability run worker processes under names of their own"},
	{"sudoku submit --wait --out solutions.txt puzzles.txt", "needs a deployment's workers; internal/cli and internal/reliability run submit --wait against worker processes and compare its output with solve --local"},
	{"docker compose up -d --scale worker=4", "needs a container engine and root; scripts/compose-smoke.sh runs the compose file in CI"},
	{"docker compose --profile producer run --rm producer", "needs a container engine and root; scripts/compose-smoke.sh runs the producer profile in CI"},
	{"docker compose down -v", "needs a container engine and root; scripts/compose-smoke.sh runs it in CI"},
}

// shellInfo are the info strings of the code blocks whose lines are
// commands; "console" blocks hold commands on "$ " lines.
var shellInfo = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// readmeCommand is a command of the README and its line.
type readmeCommand struct {
	line int
	cmd  string
}

// trailingComment is a shell comment after a command.
var trailingComment = regexp.MustCompile(`\s+#[^'"]*$`)

// normalizeCommand removes a trailing comment and "&" and collapses the
// spaces of a command.
func normalizeCommand(c string) string {
	c = trailingComment.ReplaceAllString(c, "")
	c = strings.TrimSpace(c)
	c = strings.TrimSpace(strings.TrimSuffix(c, "&"))
	return strings.Join(strings.Fields(c), " ")
}

// shellCommands returns the commands of a document's shell code blocks.
func shellCommands(doc string) []readmeCommand {
	_, blocks := splitMarkdown(doc)
	var cmds []readmeCommand
	for _, b := range blocks {
		if !shellInfo[b.info] {
			continue
		}
		var cur string
		start := 0
		for _, l := range b.lines {
			s := l.text
			if cur == "" {
				if b.info == "console" {
					var ok bool
					if s, ok = strings.CutPrefix(s, "$ "); !ok {
						continue // output
					}
				}
				if t := strings.TrimSpace(s); t == "" || strings.HasPrefix(t, "#") {
					continue
				}
				start = l.n
			}
			if more, ok := strings.CutSuffix(strings.TrimRight(s, " "), `\`); ok {
				cur += more + " "
				continue
			}
			cmds = append(cmds, readmeCommand{start, normalizeCommand(cur + s)})
			cur = ""
		}
	}
	return cmds
}

// TestShellCommands pins how commands are read from code blocks.
func TestShellCommands(t *testing.T) {
	doc := "text\n```sh\n# a comment\nsudoku a   b  # says what\n\ncurl -s x \\\n  --data y &\n```\n" +
		"```\nnot a command\n```\n```console\n$ sudoku c\noutput # not a comment\n```\n"
	want := []readmeCommand{{4, "sudoku a b"}, {6, "curl -s x --data y"}, {13, "sudoku c"}}
	got := shellCommands(doc)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("shellCommands = %v, want %v", got, want)
	}
}

// TestReadmeListing checks that every command of the README is run or
// listed as not run, with a reason, and that neither table names a
// command the README no longer has.
func TestReadmeListing(t *testing.T) {
	cmds := shellCommands(readDoc(t, "README.md"))
	if len(cmds) == 0 {
		t.Fatal("no command found in README.md's shell blocks")
	}
	for _, p := range checkListing(cmds) {
		t.Error(p)
	}
}

// checkListing returns what is wrong with the tables for cmds.
func checkListing(cmds []readmeCommand) []string {
	known := map[string]string{}
	var problems []string
	for _, r := range readmeRun {
		known[r.cmd] = "readmeRun"
	}
	for _, n := range readmeNotRun {
		if strings.TrimSpace(n.why) == "" {
			problems = append(problems, fmt.Sprintf("readmeNotRun: %q has no reason", n.cmd))
		}
		if known[n.cmd] != "" {
			problems = append(problems, fmt.Sprintf("%q is both run and listed as not run", n.cmd))
		}
		known[n.cmd] = "readmeNotRun"
	}
	inReadme := map[string]bool{}
	for _, c := range cmds {
		inReadme[c.cmd] = true
		if known[c.cmd] == "" {
			problems = append(problems, fmt.Sprintf("README.md:%d: %q is neither run (readmeRun) nor listed with a reason (readmeNotRun) in internal/docs/readme_test.go", c.line, c.cmd))
		}
	}
	for c, table := range known {
		if !inReadme[c] {
			problems = append(problems, fmt.Sprintf("%s names %q, which README.md does not have", table, c))
		}
	}
	return problems
}

// TestCheckListing shows that a command missing from the tables, or a
// table's command missing from the README, is reported.
func TestCheckListing(t *testing.T) {
	var all []readmeCommand
	for _, r := range readmeRun {
		all = append(all, readmeCommand{1, r.cmd})
	}
	for _, n := range readmeNotRun {
		all = append(all, readmeCommand{1, n.cmd})
	}
	for _, c := range []struct {
		name string
		cmds []readmeCommand
		want int
	}{
		{"every command", all, 0},
		{"a new command", append(all[:len(all):len(all)], readmeCommand{9, "sudoku job cancel ID"}), 1},
		{"a command gone from the README", all[1:], 1},
	} {
		if got := checkListing(c.cmds); len(got) != c.want {
			t.Errorf("%s: %d problems, want %d: %q", c.name, len(got), c.want, got)
		}
	}
}

// TestReadmeCommands runs the commands of readmeRun as the README gives
// them, in its order.
func TestReadmeCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the README's commands")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("no go command: %v", err)
	}
	dir := mirror(t)
	order := map[string]int{}
	for _, c := range shellCommands(readDoc(t, "README.md")) {
		if _, ok := order[c.cmd]; !ok {
			order[c.cmd] = c.line
		}
	}
	for i, r := range readmeRun {
		if i > 0 && order[r.cmd] < order[readmeRun[i-1].cmd] {
			t.Fatalf("readmeRun: %q comes before %q in README.md: keep the README's order", r.cmd, readmeRun[i-1].cmd)
		}
	}
	for _, r := range readmeRun {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", r.cmd)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit) && exit.ExitCode() == r.exit:
		case err != nil:
			t.Fatalf("README.md:%d: %s: %v, want exit status %d\n%s", order[r.cmd], r.cmd, err, r.exit, tail(stderr.String()))
		case r.exit != 0:
			t.Fatalf("README.md:%d: %s: exit status 0, want %d", order[r.cmd], r.cmd, r.exit)
		}
		if r.check != nil {
			t.Run(r.cmd, func(t *testing.T) { r.check(t, dir, stdout.String()) })
		}
	}
}

// mirror returns a folder with a link to every top-level entry of the
// repository but .git and a binary built there, so that the README's
// commands run as in a clone and what they write stays in the folder.
func mirror(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, e := range entries {
		if e.Name() == ".git" || e.Name() == "sudoku" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tail returns the last lines of s.
func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// countPuzzles returns the puzzles of a one-puzzle-a-line file: its lines
// that are neither blank nor comments.
func countPuzzles(t *testing.T, name string) int {
	t.Helper()
	n := 0
	for _, l := range strings.Split(readDoc(t, name), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			n++
		}
	}
	return n
}

// solutionLine is the output line of a solved puzzle.
var solutionLine = regexp.MustCompile(`^[1-9]{81}$`)

// checkSolutions checks that stdout is n solutions, each a valid grid.
func checkSolutions(t *testing.T, stdout string, n int) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines, want %d", len(lines), n)
	}
	for i, l := range lines {
		if !solutionLine.MatchString(l) || !validGrid(l) {
			t.Errorf("line %d: %q is not a solved grid", i+1, l)
		}
	}
}

// validGrid reports whether s, 81 digits, has each digit once in every
// row, column and box.
func validGrid(s string) bool {
	var rows, cols, boxes [9]uint16
	for i := range 81 {
		bit := uint16(1) << (s[i] - '0')
		r, c := i/9, i%9
		b := r/3*3 + c/3
		if rows[r]&bit != 0 || cols[c]&bit != 0 || boxes[b]&bit != 0 {
			return false
		}
		rows[r], cols[c], boxes[b] = rows[r]|bit, cols[c]|bit, boxes[b]|bit
	}
	return true
}

// checkSameAsLocal checks that stdout is what `sudoku solve --local file`
// prints.
func checkSameAsLocal(t *testing.T, dir, file, stdout string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, "sudoku"), "solve", "--local", file)
	cmd.Dir = dir
	want, err := cmd.Output()
	if err != nil {
		t.Fatalf("sudoku solve --local %s: %v", file, err)
	}
	if stdout != string(want) {
		t.Errorf("the output differs from solve --local's:\n%s\nwant:\n%s", tail(stdout), tail(string(want)))
	}
	checkSolutions(t, stdout, countPuzzles(t, file))
}

// commandRow is a row of the README's table of commands.
var commandRow = regexp.MustCompile("(?m)^\\| `sudoku ([a-z]+)")

// checkHelp checks that `sudoku --help` lists every command of the
// README's table.
func checkHelp(t *testing.T, _, stdout string) {
	t.Helper()
	_, commands, ok := strings.Cut(stdout, "Available Commands:")
	if !ok {
		t.Fatalf("--help has no list of commands:\n%s", stdout)
	}
	commands, _, _ = strings.Cut(commands, "\n\n")
	listed := map[string]bool{}
	for _, l := range strings.Split(commands, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			listed[f[0]] = true
		}
	}
	rows := commandRow.FindAllStringSubmatch(readDoc(t, "README.md"), -1)
	if len(rows) == 0 {
		t.Fatal("README.md has no table of commands")
	}
	for _, m := range rows {
		if !listed[m[1]] {
			t.Errorf("the README's table has `sudoku %s`, which --help does not list", m[1])
		}
	}
}
