package app

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestDefaultProofKey runs a worker's and a reader's key set-up from
// configurations of their own, as two processes of one user on one host
// with nothing set, then has a solve reply answered with "unique" for a
// puzzle that has several solutions, signed by the worker's key or
// another, before the true answer: a reader that trusts the signer takes
// the reply at its word (it does not solve it again; the puzzle's
// several solutions show it did not), any other confirms by solving and
// prints the true "multiple". proof.default: false reads and writes no
// key file; an explicit proof.trusted wins over the default.
func TestDefaultProofKey(t *testing.T) {
	q := testenv.NewQueue(t, "embedded", queue.Options{})
	// A puzzle with several solutions that a reader's cheap solve
	// (proof.CheapNodes) does not settle: only a proof can vouch for a
	// unique answer to it.
	var several string
	var g solver.Grid
	var sr solver.Result
	for _, p := range testenv.Puzzles(t, "../../solver/testdata/hardest_100.txt", 100) {
		i := strings.IndexFunc(p, func(c rune) bool { return c >= '1' && c <= '9' })
		several = p[:i] + "." + p[i+1:]
		g, _ = solver.Parse(several)
		sr, _ = solver.Solve(context.Background(), &g, solver.Options{})
		_, err := solver.Solve(context.Background(), &g, solver.Options{MaxNodes: proof.CheapNodes})
		if sr.Status == solver.Multiple && errors.Is(err, solver.ErrGaveUp) {
			break
		}
		several = ""
	}
	if several == "" {
		t.Fatalf("no puzzle of hardest_100.txt less a given has several solutions past %d nodes", proof.CheapNodes)
	}
	forged, _ := json.Marshal(result.Result{Status: result.StatusUnique, Puzzle: g.String(), Key: g.Key(), Solution: sr.Solution.Digits()})
	truth, _ := json.Marshal(result.FromSolve(&g, sr, nil))
	other, err := proof.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	otherTrusted := filepath.Join(t.TempDir(), "trusted.pem")
	pem, _ := proof.MarshalPublicKeys(other.Public().(ed25519.PublicKey))
	if err := os.WriteFile(otherTrusted, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		set      func(reader, worker *config.ProofConfig)
		byOther  bool          // the reply is signed by another key than the worker's
		want     result.Status // what the reader serves
		keyFiles int           // key files in the configuration directory after
	}{
		{"default keys, signed by the worker", func(r, w *config.ProofConfig) {}, false, result.StatusUnique, 1},
		{"default keys, signed by another key", func(r, w *config.ProofConfig) {}, true, result.StatusMultiple, 1},
		{"default off", func(r, w *config.ProofConfig) { r.Default, w.Default = false, false }, false, result.StatusMultiple, 0},
		{"default off for the reader", func(r, w *config.ProofConfig) { r.Default = false }, false, result.StatusMultiple, 1},
		{"explicit trusted wins", func(r, w *config.ProofConfig) { r.Trusted = otherTrusted }, false, result.StatusMultiple, 1},
		{"explicit trusted of the signer", func(r, w *config.ProofConfig) { r.Trusted = otherTrusted }, true, result.StatusUnique, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("XDG_CONFIG_HOME", home)
			reader, worker := config.Default(), config.Default()
			tc.set(&reader.Proof, &worker.Proof)
			// The reader starts first: the worker makes the key after.
			_, trust, err := proofKeys(reader.Proof, false, quiet)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(home, proof.DefaultDirName)); err == nil {
				t.Fatal("a reader made the key directory")
			}
			signer, _, err := proofKeys(worker.Proof, true, quiet)
			if err != nil {
				t.Fatal(err)
			}
			if tc.byOther {
				signer = proof.NewSigner(other)
			}
			if n := countFiles(t, home); n != tc.keyFiles {
				t.Fatalf("%d files in the configuration directory, want %d", n, tc.keyFiles)
			}
			reply := nats.NewMsg("")
			reply.Data = forged
			if signer != nil {
				reply.Header.Set(proof.Header, signer.SignReply(forged))
			}
			sub, err := q.NC.Subscribe(q.Opts.SolveSubject(), func(m *nats.Msg) {
				r := *reply
				r.Subject = m.Reply
				_ = q.NC.PublishMsg(&r)
				_ = q.NC.Publish(m.Reply, truth)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sub.Unsubscribe() }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := producer.Solve(ctx, q.NC, q.Opts, several, producer.SolveOptions{NoLookup: true, Trust: trust, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tc.want {
				t.Fatalf("the reader served %s, want %s", r.Status, tc.want)
			}
		})
	}
}

// countFiles returns the number of regular files under dir.
func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
