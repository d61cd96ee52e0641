package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/proof"
)

// TestDefaultProofKeyProcesses runs a worker process and a submit, each
// with the default configuration and no key set, as one user on one host
// (their own XDG_CONFIG_HOME): the worker makes the default key (0600)
// and signs every results message with it, and a reader's default trust
// (what submit, get and serve use with proof.trusted unset) takes those
// proofs, so it does not solve the answers again. With proof.default
// false the worker writes no file and signs nothing.
func TestDefaultProofKeyProcesses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string
		on    bool
	}{
		{"default", nil, true},
		{"proof.default false", []string{"SUDOKU_PROOF_DEFAULT=false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("XDG_CONFIG_HOME", home)
			e := newQueueEnv(t, tc.extra...)
			e.startWorker()
			file := writeFile(t, manyPuzzles(t, 120))
			code, out, stderr := run(t, context.Background(), "", "submit", "--wait", file)
			if code != ExitOK {
				t.Fatalf("submit --wait: exit %d: %s", code, stderr)
			}
			if want := localOut(t, file); out != want {
				t.Fatal("submit --wait: the results differ from solve --local's")
			}
			m := regexp.MustCompile(`job (\S+): \d+ lines`).FindStringSubmatch(stderr)
			if m == nil {
				t.Fatalf("no job id in submit's output:\n%s", stderr)
			}
			path := filepath.Join(home, proof.DefaultDirName, proof.DefaultKeyName)
			st, err := os.Stat(path)
			switch {
			case !tc.on && err == nil:
				t.Fatalf("proof.default false: the worker wrote %s", path)
			case !tc.on:
			case err != nil:
				t.Fatalf("the worker made no default key: %v", err)
			case st.Mode().Perm() != 0o600:
				t.Errorf("the default key's mode is %v, want 0600", st.Mode().Perm())
			}
			q := e.queue()
			trust := proof.DefaultTrust(path)
			for i := uint64(0); i < 3; i++ { // batches of 50
				msg, err := q.Results.GetLastMsgForSubject(context.Background(), q.Opts.ResultSubject(m[1], i))
				if err != nil {
					t.Fatalf("batch %d's results: %v", i, err)
				}
				sig := msg.Header.Get(proof.Header)
				if !tc.on {
					if sig != "" {
						t.Errorf("batch %d: a proof with proof.default false", i)
					}
					continue
				}
				if err := trust.VerifyResults(sig, m[1], i, msg.Data); err != nil {
					t.Errorf("batch %d: a reader's default trust refuses the worker's proof: %v", i, err)
				}
			}
		})
	}
}
