package proof_test

import (
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/proof"
)

func newSigner(t testing.TB) *proof.Signer {
	t.Helper()
	k, err := proof.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return proof.NewSigner(k)
}

// TestVerify checks that a proof passes for exactly what was signed, by
// a trusted key: another job, batch, body, kind of message or key, a
// proof cut or missing, and a reader without keys all refuse, each with
// an error matching ErrUnproven.
func TestVerify(t *testing.T) {
	s, other := newSigner(t), newSigner(t)
	trust := proof.NewTrust(s.PublicKey())
	body := []byte(`{"job":"alice.1","index":3,"items":[]}`)
	good := s.SignResults("alice.1", 3, body)
	for _, tc := range []struct {
		name  string
		trust *proof.Trust
		check func(*proof.Trust) error
		ok    bool
	}{
		{"results as signed", trust, func(tr *proof.Trust) error { return tr.VerifyResults(good, "alice.1", 3, body) }, true},
		{"another job", trust, func(tr *proof.Trust) error { return tr.VerifyResults(good, "bob.1", 3, body) }, false},
		{"another batch", trust, func(tr *proof.Trust) error { return tr.VerifyResults(good, "alice.1", 4, body) }, false},
		{"another body", trust, func(tr *proof.Trust) error {
			return tr.VerifyResults(good, "alice.1", 3, append([]byte{' '}, body...))
		}, false},
		{"a results proof as a reply's", trust, func(tr *proof.Trust) error { return tr.VerifyReply(good, body) }, false},
		{"reply as signed", trust, func(tr *proof.Trust) error { return tr.VerifyReply(s.SignReply(body), body) }, true},
		{"an untrusted key", trust, func(tr *proof.Trust) error {
			return tr.VerifyResults(other.SignResults("alice.1", 3, body), "alice.1", 3, body)
		}, false},
		{"no proof", trust, func(tr *proof.Trust) error { return tr.VerifyResults("", "alice.1", 3, body) }, false},
		{"a proof cut short", trust, func(tr *proof.Trust) error { return tr.VerifyResults(good[:40], "alice.1", 3, body) }, false},
		{"not base64", trust, func(tr *proof.Trust) error {
			return tr.VerifyResults(strings.Repeat("*", len(good)), "alice.1", 3, body)
		}, false},
		{"no trusted keys", nil, func(tr *proof.Trust) error { return tr.VerifyResults(good, "alice.1", 3, body) }, false},
		{"a key added by With", proof.NewTrust(other.PublicKey()).With(s.PublicKey()), func(tr *proof.Trust) error {
			return tr.VerifyResults(good, "alice.1", 3, body)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(tc.trust)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, proof.ErrUnproven) {
				t.Errorf("err = %v, does not match ErrUnproven", err)
			}
		})
	}
}

// TestKeyFiles checks that the key files round-trip, and that a file of
// the wrong kind is refused naming the key and the file.
func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
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
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyPath, trustPath := write("key.pem", priv), write("trusted.pem", pub)
	s, err := proof.LoadSigner(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := proof.LoadTrust(trustPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.VerifyReply(s.SignReply([]byte("x")), []byte("x")); err != nil {
		t.Errorf("loaded keys do not agree: %v", err)
	}
	if s, err := proof.LoadSigner(""); s != nil || err != nil {
		t.Errorf("LoadSigner(\"\") = %v, %v; want nil, nil", s, err)
	}
	if tr, err := proof.LoadTrust(""); tr.Enabled() || err != nil {
		t.Errorf("LoadTrust(\"\") enabled %v, %v; want none, nil", tr.Enabled(), err)
	}
	for _, tc := range []struct {
		name string
		load func() error
		want string
	}{
		{"public key as proof.key", func() error { _, err := proof.LoadSigner(trustPath); return err }, "proof.key " + trustPath},
		{"private key as proof.trusted", func() error { _, err := proof.LoadTrust(keyPath); return err }, "proof.trusted " + keyPath},
		{"missing proof.key", func() error { _, err := proof.LoadSigner(filepath.Join(dir, "none")); return err }, "proof.key"},
		{"empty proof.trusted", func() error { _, err := proof.LoadTrust(write("empty.pem", nil)); return err }, "proof.trusted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.load()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// BenchmarkVerifyResults measures what a reader pays per results message
// (4,096 answers of about 60 bytes).
func BenchmarkVerifyResults(b *testing.B) {
	s := newSigner(b)
	trust := proof.NewTrust(s.PublicKey())
	body := make([]byte, 60*4096)
	sig := s.SignResults("alice.1", 3, body)
	for b.Loop() {
		if err := trust.VerifyResults(sig, "alice.1", 3, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSignResults measures what a worker pays per results message.
func BenchmarkSignResults(b *testing.B) {
	s := newSigner(b)
	body := make([]byte, 60*4096)
	for b.Loop() {
		s.SignResults("alice.1", 3, body)
	}
}
