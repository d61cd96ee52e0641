package service_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
)

// protocolDoc is the document whose examples TestProtocolDoc runs.
const protocolDoc = "../../docs/protocol.md"

// runnableMarker, on the line before a ```console block, makes the block
// an example the test runs.
const runnableMarker = "<!-- runnable -->"

// docCommand is one command of a runnable block and the output the
// document shows for it.
type docCommand struct {
	line int // in the document
	cmd  string
	want []string
}

// parseDocExamples returns the commands of the runnable blocks of a
// Markdown document, in order.
func parseDocExamples(doc string) ([]docCommand, error) {
	var cmds []docCommand
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != runnableMarker {
			continue
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```console" {
			return nil, fmt.Errorf("line %d: %s is not followed by a ```console block", i+1, runnableMarker)
		}
		i += 2
		start := len(cmds)
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			if c, ok := strings.CutPrefix(lines[i], "$ "); ok {
				cmds = append(cmds, docCommand{line: i + 1, cmd: c})
				continue
			}
			if len(cmds) == start {
				return nil, fmt.Errorf("line %d: output before any command", i+1)
			}
			cmds[len(cmds)-1].want = append(cmds[len(cmds)-1].want, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("the block of line %d is not closed", start)
		}
		if len(cmds) == start {
			return nil, fmt.Errorf("line %d: a runnable block without a command", i+1)
		}
	}
	return cmds, nil
}

// placeholder is a <name> in a command or its output.
var placeholder = regexp.MustCompile(`<([a-z][a-z0-9_]*)>`)

// normalize trims a line and collapses its runs of spaces.
func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// linePattern compiles an expected line: literal text, with each
// placeholder a variable (vars: captured once, then its value) or a
// wildcard.
func linePattern(line string, vars map[string]bool, bound map[string]string) (*regexp.Regexp, []string) {
	line = normalize(line)
	var b strings.Builder
	var captures []string
	b.WriteString("^")
	last := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(line, -1) {
		b.WriteString(regexp.QuoteMeta(line[last:m[0]]))
		name := line[m[2]:m[3]]
		switch v, ok := bound[name]; {
		case ok:
			b.WriteString(regexp.QuoteMeta(v))
		case vars[name] && !contains(captures, name):
			b.WriteString(`([^\s"'<>]+)`)
			captures = append(captures, name)
		case vars[name]:
			b.WriteString(`[^\s"'<>]+`) // the same variable twice in a line: checked once bound
		default:
			b.WriteString(`.*?`)
		}
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(line[last:]))
	b.WriteString("$")
	return regexp.MustCompile(b.String()), captures
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// matchOutput checks output lines against the expected ones (see the
// document's rules), binding the variables it captures. It returns what
// does not match.
func matchOutput(want, got []string, vars map[string]bool, bound map[string]string) error {
	var exp []string
	more := false
	for _, w := range want {
		switch strings.TrimSpace(w) {
		case "":
		case "...":
			more = true
		default:
			exp = append(exp, w)
		}
	}
	var out []string
	for _, g := range got {
		if normalize(g) != "" {
			out = append(out, normalize(g))
		}
	}
	used := make([]bool, len(out))
	// First the lines that bind a variable, in order, each to the first
	// line that matches.
	var rest []string
	for _, w := range exp {
		re, captures := linePattern(w, vars, bound)
		if len(captures) == 0 {
			rest = append(rest, w)
			continue
		}
		found := false
		for j, o := range out {
			if m := re.FindStringSubmatch(o); !used[j] && m != nil {
				for k, name := range captures {
					bound[name] = m[k+1]
				}
				used[j], found = true, true
				break
			}
		}
		if !found {
			return fmt.Errorf("no line of the output matches %q", normalize(w))
		}
	}
	// Then the others, in any order: a bipartite matching.
	res := make([]*regexp.Regexp, len(rest))
	for i, w := range rest {
		res[i], _ = linePattern(w, vars, bound)
	}
	owner := make([]int, len(out)) // the expected line that holds output line j, or -1
	for j := range owner {
		owner[j] = -1
	}
	var try func(i int, seen []bool) bool
	try = func(i int, seen []bool) bool {
		for j, o := range out {
			if used[j] || seen[j] || !res[i].MatchString(o) {
				continue
			}
			seen[j] = true
			if owner[j] < 0 || try(owner[j], seen) {
				owner[j] = i
				return true
			}
		}
		return false
	}
	for i := range rest {
		if !try(i, make([]bool, len(out))) {
			return fmt.Errorf("no line of the output matches %q", normalize(rest[i]))
		}
	}
	if !more {
		for j, o := range out {
			if !used[j] && owner[j] < 0 {
				return fmt.Errorf("the output has a line the document does not show (and no \"...\"): %q", o)
			}
		}
	}
	return nil
}

func TestMatchOutput(t *testing.T) {
	vars := map[string]bool{"job": true}
	for _, tc := range []struct {
		name      string
		want, got []string
		ok        bool
		job       string
	}{
		{"same", []string{"a  b", "c"}, []string{" a b ", "", "c"}, true, ""},
		{"any order", []string{"a", "<t> x"}, []string{"1 x", "a"}, true, ""},
		{"wildcard does not steal", []string{"<t>", "{x}"}, []string{"{x}", "12:00"}, true, ""},
		{"extra line", []string{"a"}, []string{"a", "b"}, false, ""},
		{"extra line allowed", []string{"...", "a"}, []string{"a", "b"}, true, ""},
		{"missing line", []string{"a", "b"}, []string{"a"}, false, ""},
		{"variable", []string{`{"job":"<job>"}`, "sub.<job>.>"}, []string{"sub.j1.>", `{"job":"j1"}`}, true, "j1"},
		{"variable differs", []string{`{"job":"<job>"}`, "sub.<job>.>"}, []string{"sub.j2.>", `{"job":"j1"}`}, false, ""},
		{"literal regexp characters", []string{"a.b (c) [d]"}, []string{"a.b (c) [d]"}, true, ""},
		{"literal regexp characters differ", []string{"a.b"}, []string{"axb"}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bound := map[string]string{}
			err := matchOutput(tc.want, tc.got, vars, bound)
			if (err == nil) != tc.ok || tc.ok && bound["job"] != tc.job {
				t.Errorf("matchOutput(%q, %q) = %v, job %q", tc.want, tc.got, err, bound["job"])
			}
		})
	}
}

// natsCLI returns the path of the nats CLI: on PATH, or where go install
// puts it.
func natsCLI(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nats"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "nats")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	testenv.Unavailable(t, "the nats CLI (go install github.com/nats-io/natscli/nats@v0.5.0)", err)
	return ""
}

// TestProtocolDoc runs the runnable examples of docs/protocol.md with the
// nats CLI against a private nats-server and a worker in this process,
// with the default names and no cache, and checks their output.
func TestProtocolDoc(t *testing.T) {
	doc, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := parseDocExamples(string(doc))
	if err != nil {
		t.Fatalf("%s: %v", protocolDoc, err)
	}
	if len(cmds) < 10 {
		t.Fatalf("%s: %d runnable commands, want the examples of every endpoint", protocolDoc, len(cmds))
	}
	cli := natsCLI(t)
	srv := testenv.NATSServer(t)
	nc, err := nats.Connect(srv.URL(), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	q, err := queue.Setup(ctx, js, queue.Options{Update: true})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, nc, q, nil, producer.Options{Logger: quiet})

	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "NATS_URL="+srv.URL(), "HOME="+t.TempDir(), "NATS_CONTEXT=",
		"PATH="+filepath.Dir(cli)+string(os.PathListSeparator)+os.Getenv("PATH"))
	// The placeholders that commands use are variables.
	vars := map[string]bool{}
	for _, c := range cmds {
		for _, m := range placeholder.FindAllStringSubmatch(c.cmd, -1) {
			vars[m[1]] = true
		}
	}
	bound := map[string]string{}
	for _, c := range cmds {
		cmd := placeholder.ReplaceAllStringFunc(c.cmd, func(p string) string {
			v, ok := bound[p[1:len(p)-1]]
			if !ok {
				t.Fatalf("%s:%d: %s: %s has no value yet", protocolDoc, c.line, c.cmd, p)
			}
			return v
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		run := exec.CommandContext(ctx, "bash", "-c", cmd)
		run.Dir, run.Env = root, env
		var stdout, stderr bytes.Buffer
		run.Stdout, run.Stderr = &stdout, &stderr
		start := time.Now()
		err := run.Run()
		cancel()
		out := stderr.String() + stdout.String()
		if err != nil {
			t.Fatalf("%s:%d: %s: %v after %s\n%s", protocolDoc, c.line, cmd, err, time.Since(start).Round(time.Millisecond), out)
		}
		var got []string
		sc := bufio.NewScanner(strings.NewReader(out))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			got = append(got, sc.Text())
		}
		if err := matchOutput(c.want, got, vars, bound); err != nil {
			t.Errorf("%s:%d: %s: %v\noutput:\n%s", protocolDoc, c.line, cmd, err, out)
		}
	}
}
