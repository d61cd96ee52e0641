package proof_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/proof"
)

// TestLoadOrCreateKeyRace starts workers that make the default key at
// once: they all end with the same key, one of them made it, the file
// is 0600 in a 0700 directory, and no temporary file is left.
func TestLoadOrCreateKeyRace(t *testing.T) {
	for _, n := range []int{1, 2, 16} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cfg", proof.DefaultDirName)
			path := filepath.Join(dir, proof.DefaultKeyName)
			signers := make([]*proof.Signer, n)
			created := make([]bool, n)
			errs := make([]error, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					signers[i], created[i], errs[i] = proof.LoadOrCreateKey(path)
				})
			}
			close(start)
			wg.Wait()
			makers := 0
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("worker %d: %v", i, errs[i])
				}
				if created[i] {
					makers++
				}
				if !signers[i].PublicKey().Equal(signers[0].PublicKey()) {
					t.Errorf("worker %d has key %s, worker 0 %s", i, proof.IDOf(signers[i].PublicKey()), proof.IDOf(signers[0].PublicKey()))
				}
			}
			if makers != 1 {
				t.Errorf("%d workers say they made the key, want 1", makers)
			}
			if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("key file: %v, mode %v; want 0600", err, st.Mode().Perm())
			}
			if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
				t.Errorf("key directory: %v, mode %v; want 0700", err, st.Mode().Perm())
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("directory holds %d files, want the key only", len(ents))
			}
			// Made once, read after.
			again, made, err := proof.LoadOrCreateKey(path)
			if err != nil || made || !again.PublicKey().Equal(signers[0].PublicKey()) {
				t.Errorf("second load: made %v, err %v, same key %v", made, err, err == nil && again.PublicKey().Equal(signers[0].PublicKey()))
			}
		})
	}
}

// TestDefaultTrust checks that a reader's default trust takes the
// default key once a worker made it, even after the reader started, and
// nothing else: a proof by another key is refused before and after.
func TestDefaultTrust(t *testing.T) {
	path := filepath.Join(t.TempDir(), proof.DefaultKeyName)
	trust := proof.DefaultTrust(path)
	with := trust.With(newSigner(t).PublicKey()) // as a process with its own workers makes it
	other := newSigner(t)
	body := []byte("x")
	if err := trust.VerifyReply(other.SignReply(body), body); err == nil {
		t.Fatal("a proof by another key passed before the key file exists")
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the reader made the key file")
	}
	worker, made, err := proof.LoadOrCreateKey(path)
	if err != nil || !made {
		t.Fatalf("LoadOrCreateKey: %v, made %v", err, made)
	}
	for name, tr := range map[string]*proof.Trust{"default": trust, "with": with} {
		if err := tr.VerifyReply(worker.SignReply(body), body); err != nil {
			t.Errorf("%s: the worker's proof by the default key refused: %v", name, err)
		}
		if err := tr.VerifyReply(other.SignReply(body), body); err == nil {
			t.Errorf("%s: a proof by another key passed", name)
		}
	}
	if err := trust.With().VerifyReply(worker.SignReply(body), body); err != nil {
		t.Errorf("With after the key was read: %v", err)
	}
}
