package roles_test

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/proof"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/roles"
)

// TestInitProofKeys checks that Init gives each worker user a proof key
// of its own (private: 0600), kept from one Init to the next, and writes
// the public keys of them all, and no other, as the readers' trusted
// file (issue 28: a reader must be able to tell a worker's answer from a
// forgery).
func TestInitProofKeys(t *testing.T) {
	dir := t.TempDir()
	n := roles.NamesOf(queue.Options{}, "")
	keyOf := func(user string) ed25519.PublicKey {
		t.Helper()
		path := filepath.Join(dir, user, roles.ProofKeyFile)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", path, st.Mode().Perm())
		}
		s, err := proof.LoadSigner(path)
		if err != nil {
			t.Fatal(err)
		}
		return s.PublicKey()
	}
	trusted := func() *proof.Trust {
		t.Helper()
		tr, err := proof.LoadTrust(filepath.Join(dir, roles.ProofTrustedFile))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	if _, err := roles.Init(dir, n, roles.InitOptions{Owner: -1}); err != nil {
		t.Fatal(err)
	}
	first := keyOf("worker")
	for _, user := range []string{"admin", "producer", "gateway", "reader"} {
		if _, err := os.Stat(filepath.Join(dir, user, roles.ProofKeyFile)); err == nil {
			t.Errorf("user %s (not a worker) has a proof key", user)
		}
	}
	if _, err := roles.Init(dir, n, roles.InitOptions{Owner: -1, Users: []string{"worker-gpu"}}); err != nil {
		t.Fatal(err)
	}
	if again := keyOf("worker"); !again.Equal(first) {
		t.Error("a second Init replaced the worker's key")
	}
	second := keyOf("worker-gpu")
	if second.Equal(first) {
		t.Error("two workers share a key")
	}
	data, err := os.ReadFile(filepath.Join(dir, roles.ProofTrustedFile))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := proof.ParsePublicKeys(data, "trusted")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || !(keys[0].Equal(first) && keys[1].Equal(second) || keys[0].Equal(second) && keys[1].Equal(first)) {
		t.Errorf("trusted file holds %d keys, want the two workers'", len(keys))
	}
	// Every user but the workers has the same file in its folder (a
	// Secret made of the folder is all its process needs); workers none.
	for _, user := range []string{"admin", "producer", "gateway", "reader", "worker", "worker-gpu"} {
		copy, err := os.ReadFile(filepath.Join(dir, user, roles.ProofTrustedFile))
		switch r, _ := roles.Of(user); {
		case r == roles.Worker && err == nil:
			t.Errorf("worker user %s has a trusted file", user)
		case r != roles.Worker && err != nil:
			t.Errorf("user %s: %v", user, err)
		case r != roles.Worker && string(copy) != string(data):
			t.Errorf("user %s's trusted file differs from %s", user, roles.ProofTrustedFile)
		}
	}
	// What a worker signs with its key, a reader of the trusted file takes.
	s, err := proof.LoadSigner(filepath.Join(dir, "worker-gpu", roles.ProofKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("results")
	if err := trusted().VerifyResults(s.SignResults("producer.1", 0, body), "producer.1", 0, body); err != nil {
		t.Errorf("a worker's proof is refused by the trusted file: %v", err)
	}
}
