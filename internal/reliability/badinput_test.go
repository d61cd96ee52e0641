package reliability

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/cli"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
)

const (
	// valid is a 17-clue puzzle; solvable has one solution too.
	valid    = ".................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7..."
	solvable = ".................1.....2.3......3.2...4....5...6.1.....3......6.7..8...952.7....."
	// easy needs no guess: a budget of one node is enough.
	easy = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"
	// hard needs a search: a budget of one node is not.
	hard = "98.7..6..5..9..7......8....6..4..5....3..2.......6..1.2....9..5.6.2....7..9.4.2.."
)

// at returns valid with s in place of its cell i.
func at(i int, s string) string { return valid[:i] + s + valid[i+1:] }

// corpusLine is one line of the bad-input corpus and what each door must
// answer for it: a solution (want "") or an error matching want.
type corpusLine struct {
	name string
	text string
	want string // regexp of the reason after "error: line N: "; "" for a solution
}

// corpus is malformed input of every kind, with valid puzzles between.
var corpus = []corpusLine{
	{"valid", valid, ""},
	{"too short", "123", `^solver: 3 cells, want 81$`},
	{"one cell short", valid[:80], `^solver: 80 cells, want 81$`},
	{"one cell too many", valid + ".", `^solver: 82 cells, want 81$`},
	{"letter", at(10, "x"), `^solver: column 11: invalid character 'x' \(U\+0078\) for cell r2c2`},
	{"full-width digit", at(0, "１"), `^solver: column 1: invalid character '１' \(U\+FF11\) for cell r1c1`},
	{"NUL byte", at(40, "\x00"), `^solver: column 41: invalid character '\\x00' \(U\+0000\) for cell r5c5`},
	{"invalid UTF-8", at(5, "\xff"), `invalid character .* \(U\+FFFD\) for cell r1c6`},
	{"tab inside", at(20, "\t"), `invalid character '\\t' \(U\+0009\) for cell r3c3`},
	{"HTML", "<b>" + valid + "</b>", `^solver: column 1: invalid character '<' \(U\+003C\)`},
	{"CRLF line end", solvable + "\r", ""}, // the file's "\n" makes it "\r\n"
	{"10 MB line", strings.Repeat("1", 10<<20), `^solver: input of 10485760 bytes is too long for a puzzle \(at most 4096\)$`},
	{"10 MB line of another length", strings.Repeat("1", 10<<20+1), `^solver: input of 10485761 bytes is too long`},
	{"repeat in a row", "11" + valid[2:], `^solver: digit 1 repeats in row 1: r1c1 and r1c2$`},
	{"repeat in a column", "2" + valid[1:9] + "2" + valid[10:], `^solver: digit 2 repeats in column 1: r1c1 and r2c1$`},
	{"repeat in a box", "3" + valid[1:10] + "3" + valid[11:], `^solver: digit 3 repeats in box 1: r1c1 and r2c2$`},
	{"no solution", "1................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7...", `^no solution$`},
	{"several solutions", "..." + valid[3:17] + "." + valid[18:], `^multiple solutions: [1-9]{81}$`},
	{"easy", easy, ""},
}

// writeCorpus writes the corpus to a file, with empty lines, blank lines
// and comments between its lines (which give no output), and returns the
// file's name and each corpus line's line number.
func writeCorpus(t *testing.T, lines []corpusLine) (string, []int) {
	t.Helper()
	var b strings.Builder
	var nums []int
	n := 0
	for i, l := range lines {
		switch i % 3 {
		case 1:
			b.WriteString("\n")
			n++
		case 2:
			b.WriteString("  \t \n# a comment\n")
			n += 2
		}
		b.WriteString(l.text + "\n")
		n++
		nums = append(nums, n)
	}
	name := filepath.Join(t.TempDir(), "corpus.txt")
	if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return name, nums
}

// checkCorpusOutput checks that out has one line per corpus line, each the
// solution or the error it should be, naming its line.
func checkCorpusOutput(t *testing.T, door string, lines []corpusLine, nums []int, out string) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != len(lines) {
		t.Fatalf("%s: %d output lines for %d puzzle lines:\n%.2000s", door, len(got), len(lines), out)
	}
	for i, l := range lines {
		if l.want == "" {
			if err := isSolution(strings.TrimSpace(l.text), got[i]); err != nil {
				t.Errorf("%s: %s (line %d): %v", door, l.name, nums[i], err)
			}
			continue
		}
		prefix := "error: line " + strconv.Itoa(nums[i]) + ": "
		reason, ok := strings.CutPrefix(got[i], prefix)
		if !ok || !regexp.MustCompile(l.want).MatchString(reason) {
			t.Errorf("%s: %s: got %.300q, want %q then %s", door, l.name, got[i], prefix, l.want)
		}
	}
}

// TestBadInputEveryDoor passes the corpus through every door: solve
// --local, submit --wait (producer, queue, worker, cache) and get. Each
// line gets its own clear error naming its line number; the valid
// puzzles among them are solved; nothing crashes or hangs.
func TestBadInputEveryDoor(t *testing.T) {
	t.Parallel()
	s := newSys(t, options{})
	file, nums := writeCorpus(t, corpus)

	code, local, stderr := s.run(time.Minute, "", "solve", "--local", file)
	if code != cli.ExitFailure {
		t.Fatalf("solve --local: exit %d, want 1: %s", code, stderr)
	}
	checkCorpusOutput(t, "solve --local", corpus, nums, local)
	if !strings.Contains(stderr, "3 unique, 1 multiple, 1 none, 14 invalid") {
		t.Errorf("solve --local summary: %q", stderr)
	}

	w := s.startWorker("worker")
	code, queued, stderr := s.run(time.Minute, "", "submit", "--wait", file)
	if code != cli.ExitFailure {
		t.Fatalf("submit --wait: exit %d, want 1: %s", code, stderr)
	}
	checkCorpusOutput(t, "submit --wait", corpus, nums, queued)
	if queued != local {
		t.Errorf("submit --wait and solve --local differ")
	}
	// submit reports each invalid line as it reads them, with its number.
	for i, l := range corpus {
		if l.want != "" && strings.HasPrefix(l.want, "^solver") {
			if !strings.Contains(stderr, "line "+strconv.Itoa(nums[i])+": solver: ") {
				t.Errorf("submit does not report line %d (%s):\n%.3000s", nums[i], l.name, stderr)
			}
		}
	}

	// get, with the puzzle as its argument: invalid ones are refused with
	// their reason, the others found in the cache the job filled. (An
	// argument cannot hold a NUL byte, nor be over 128 kB on Linux: exec
	// refuses those before sudoku could see them.)
	for _, l := range corpus {
		arg := l.text
		if strings.ContainsRune(arg, 0) || len(arg) > 128<<10 {
			continue
		}
		code, out, stderr := s.run(time.Minute, "", "get", arg)
		switch {
		case l.want == "":
			if code != cli.ExitOK || isSolution(strings.TrimSpace(arg), strings.TrimSpace(out)) != nil {
				t.Errorf("get %s: exit %d, %.200q, %s", l.name, code, out, stderr)
			}
		default:
			reason, ok := strings.CutPrefix(strings.TrimSuffix(out, "\n"), "error: ")
			want := strings.Replace(l.want, "^solver: column", "^solver: (line 1 )?column", 1)
			if code != cli.ExitFailure || !ok || !regexp.MustCompile(want).MatchString(reason) {
				t.Errorf("get %s: exit %d, out %.300q, stderr %.300q; want 1 and %s", l.name, code, out, stderr, l.want)
			}
		}
	}
	// get --solve on the interactive path (the workers' solve endpoint),
	// for a valid puzzle not cached yet: exit 0 and its solution; then it
	// is cached.
	_, fresh := genFile(t, hardest, 1, 99)
	code, out, stderr := s.run(time.Minute, "", "get", fresh[0])
	if code != cli.ExitFailure || !strings.Contains(stderr, "not in the cache") {
		t.Fatalf("get of a puzzle never solved: exit %d, %q, %s; want 1, not in the cache", code, out, stderr)
	}
	code, out, stderr = s.run(time.Minute, "", "get", "--solve", "--timeout", "30s", fresh[0])
	if code != cli.ExitOK {
		t.Fatalf("get --solve: exit %d, want 0: %s", code, stderr)
	}
	if err := isSolution(fresh[0], strings.TrimSpace(out)); err != nil {
		t.Fatalf("get --solve: %v", err)
	}
	s.waitFor("the solve endpoint's answer in the cache", 10*time.Second, func() bool {
		code, cached, _ := s.run(time.Minute, "", "get", fresh[0])
		return code == cli.ExitOK && cached == out
	})
	if w.exited() {
		t.Fatalf("the worker died: %s", tail(w.stderr.String(), 20))
	}
	s.checkDrained()
}

// TestBudget: a search that runs out of its node budget (--max-nodes for
// solve --local, SUDOKU_WORKER_MAX_NODES for a worker) gives that puzzle
// a clear "gave up" error; the puzzles around it are still solved.
//
// The worker's gave_up is printed on its proof: every process of the
// test has the worker's key (proof.key) and trusts it (proof.trusted).
// A reader without them would solve the puzzle itself, with the default
// budget, and print its own answer instead.
func TestBudget(t *testing.T) {
	t.Parallel()
	key, trusted := proofKeys(t)
	s := newSys(t, options{env: []string{"SUDOKU_PROOF_KEY=" + key, "SUDOKU_PROOF_TRUSTED=" + trusted}})
	lines := []corpusLine{
		{"easy", easy, ""},
		{"hard", hard, `^solver: gave up after 1 nodes \(\d+ guesses\) without an answer$`},
		{"easy again", strings.Replace(easy, "5", "0", 1), ""},
	}
	file, nums := writeCorpus(t, lines)
	code, local, stderr := s.run(time.Minute, "", "solve", "--local", "--max-nodes", "1", file)
	if code != cli.ExitFailure || !strings.Contains(stderr, "2 unique, 1 gave_up") {
		t.Fatalf("solve --local --max-nodes 1: exit %d: %s", code, stderr)
	}
	checkCorpusOutput(t, "solve --local", lines, nums, local)

	w := s.startWorker("worker", "SUDOKU_WORKER_MAX_NODES=1")
	code, queued, stderr := s.run(time.Minute, "", "submit", "--wait", file)
	if code != cli.ExitFailure || !strings.Contains(stderr, "2 unique, 1 gave_up") {
		t.Fatalf("submit --wait with SUDOKU_WORKER_MAX_NODES=1: exit %d: %s", code, stderr)
	}
	checkCorpusOutput(t, "submit --wait", lines, nums, queued)
	s.checkDrained()

	// A gave_up in the cache is not an answer: with the default budget, the
	// same file is solved, not served the old gave_up.
	w.stop(20 * time.Second)
	s.startWorker("worker-default-budget")
	code, queued, stderr = s.run(time.Minute, "", "submit", "--wait", file)
	if code != cli.ExitOK {
		t.Fatalf("submit --wait again with the default budget: exit %d: %s", code, stderr)
	}
	checkSummary(t, stderr, jobIDRe.FindStringSubmatch(stderr)[1], "3 unique (1 from the workers, 2 from the cache)")
	lines[1].want = ""
	checkCorpusOutput(t, "submit --wait", lines, nums, queued)
}

// proofKeys writes a worker's proof key and the file that trusts it to a
// temporary folder and returns their paths.
func proofKeys(t *testing.T) (key, trusted string) {
	t.Helper()
	k, err := proof.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, err := proof.MarshalPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := proof.MarshalPublicKeys(k.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	key, trusted = filepath.Join(dir, "proof_key.pem"), filepath.Join(dir, "proof_trusted.pem")
	if err := os.WriteFile(key, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trusted, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return key, trusted
}
