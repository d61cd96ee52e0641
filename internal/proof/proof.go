// Package proof signs what a worker produced and checks such signatures:
// the proof that an answer a reader cannot check cheaply (a unique
// solution's uniqueness, a gave_up) came from a worker, not from whoever
// could publish on a results subject, answer a solve request or write the
// cache.
//
// A worker holds an ed25519 private key (config proof.key); readers hold
// the public keys they trust (proof.trusted, a PEM file of one or more).
// A worker signs, once per message:
//
//   - a results message: its job id, batch index and the SHA-256 of its
//     body, in the Sudoku-Proof header (Header);
//   - a solve reply a reader cannot confirm cheaply (see CheapNodes):
//     the SHA-256 of its body (the puzzle and its answer), in the same
//     header;
//
// A proof is a key id (the first 8 bytes of the SHA-256 of the public
// key) and a signature; checking one costs about 50 us, once per message
// (a results message holds up to 4,096 answers). A reader takes what a
// trusted proof covers at its word, and checks anything else by solving
// (job.Outcome.Verify).
package proof

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// CheapNodes is the search, in solver nodes, within which a reader
// confirms a unique answer by solving it again rather than by checking
// a proof: checking an ed25519 proof costs 60-150 us, about what 64
// nodes of search cost, while most puzzles are solved in fewer (17-clue
// ones in at most 9, 4 us; the hardest sets in up to 650: their proofs
// decide). A worker leaves unsigned the solve replies it found within
// it, and readers solve those.
const CheapNodes = 64

// Header is the NATS header that carries a message's proof.
const Header = "Sudoku-Proof"

// Reason is the refusal reason of an answer that no trusted proof
// vouches for and that the reader's own solve contradicts.
const Reason = "results_unproven"

// ErrUnproven is matched (errors.Is) by every error that says a proof is
// missing, from an unknown key or wrong, and by job.Outcome.Verify's
// refusal of an unproven answer.
var ErrUnproven = errors.New(Reason)

// version is the first byte of every proof's encoding.
const version = 1

// KeyID names a public key in a proof: the first 8 bytes of its SHA-256.
type KeyID [8]byte

// IDOf returns the key id of pub.
func IDOf(pub ed25519.PublicKey) KeyID {
	sum := sha256.Sum256(pub)
	return KeyID(sum[:8])
}

// String is the id in hex.
func (id KeyID) String() string { return fmt.Sprintf("%x", id[:]) }

// The domains of what is signed: a signature of one kind never passes
// for another.
const (
	domainResults = "sudoku-proof/results/v1\x00"
	domainReply   = "sudoku-proof/solve/v1\x00"
)

// Signer signs with a worker's private key. A nil *Signer signs nothing
// (its methods return ""), for a worker with no key.
type Signer struct {
	key ed25519.PrivateKey
	id  KeyID
}

// NewSigner returns a Signer of key.
func NewSigner(key ed25519.PrivateKey) *Signer {
	return &Signer{key: key, id: IDOf(key.Public().(ed25519.PublicKey))}
}

// PublicKey returns the public key of s.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// sign returns the proof of msg: version, key id, signature, in base64.
func (s *Signer) sign(msg []byte) string {
	if s == nil {
		return ""
	}
	var raw [1 + 8 + ed25519.SignatureSize]byte
	raw[0] = version
	copy(raw[1:9], s.id[:])
	copy(raw[9:], ed25519.Sign(s.key, msg))
	return base64.RawStdEncoding.EncodeToString(raw[:])
}

// SignResults returns the proof of the results message of batch index of
// job whose body is data ("" for a nil s).
func (s *Signer) SignResults(job string, index uint64, data []byte) string {
	if s == nil {
		return ""
	}
	return s.sign(resultsMsg(job, index, data))
}

// SignReply returns the proof of a solve reply whose body is data.
func (s *Signer) SignReply(data []byte) string {
	if s == nil {
		return ""
	}
	return s.sign(replyMsg(data))
}

func resultsMsg(job string, index uint64, data []byte) []byte {
	sum := sha256.Sum256(data)
	m := make([]byte, 0, len(domainResults)+len(job)+1+8+len(sum))
	m = append(m, domainResults...)
	m = append(m, job...)
	m = append(m, 0)
	m = binary.BigEndian.AppendUint64(m, index)
	return append(m, sum[:]...)
}

func replyMsg(data []byte) []byte {
	sum := sha256.Sum256(data)
	return append([]byte(domainReply), sum[:]...)
}

// Trust is the set of public keys a reader trusts. A nil or empty Trust
// trusts no key: every proof is refused, and a reader confirms what it
// cannot check by solving (Enabled says which).
//
// A Trust may also name a key file not read yet (DefaultTrust): the
// default key of this host's workers, which a worker may make after the
// reader started. It is read when a proof by a key not trusted yet comes,
// until it has been read once.
type Trust struct {
	keys map[KeyID]ed25519.PublicKey
	// pending, if set, is the private key file whose public key this
	// Trust takes once it exists (DefaultTrust).
	pending string
	// late holds the key read from pending (*ed25519.PublicKey), once.
	late atomic.Pointer[ed25519.PublicKey]
	mu   sync.Mutex // serialises the reads of pending
}

// NewTrust returns a Trust of keys.
func NewTrust(keys ...ed25519.PublicKey) *Trust {
	t := &Trust{keys: make(map[KeyID]ed25519.PublicKey, len(keys))}
	for _, k := range keys {
		t.keys[IDOf(k)] = k
	}
	return t
}

// With returns a Trust of t's keys and keys (t is left as it is; a nil
// t has none). A key file t waits for (DefaultTrust) the result waits
// for too.
func (t *Trust) With(keys ...ed25519.PublicKey) *Trust {
	var all []ed25519.PublicKey
	pending := ""
	if t != nil {
		for _, k := range t.keys {
			all = append(all, k)
		}
		if k := t.late.Load(); k != nil {
			all = append(all, *k)
		} else {
			pending = t.pending
		}
	}
	n := NewTrust(append(all, keys...)...)
	n.pending = pending
	return n
}

// Enabled reports whether t trusts any key, or waits for a key file
// (DefaultTrust).
func (t *Trust) Enabled() bool { return t != nil && (len(t.keys) > 0 || t.pending != "") }

// verify checks proof (as sign makes it) of msg.
func (t *Trust) verify(proof string, msg []byte) error {
	if proof == "" {
		return fmt.Errorf("%w: no proof", ErrUnproven)
	}
	if !t.Enabled() {
		return fmt.Errorf("%w: no trusted keys configured (proof.trusted)", ErrUnproven)
	}
	var raw [1 + 8 + ed25519.SignatureSize]byte
	if n, err := base64.RawStdEncoding.Decode(raw[:], []byte(proof)); err != nil || n != len(raw) || len(proof) != base64.RawStdEncoding.EncodedLen(len(raw)) {
		return fmt.Errorf("%w: the proof does not decode", ErrUnproven)
	}
	return t.verifyRaw(raw[:], msg)
}

// key returns the trusted key of id, reading the pending key file (once
// it exists) when id is not among the keys read so far.
func (t *Trust) key(id KeyID) (ed25519.PublicKey, bool) {
	if k, ok := t.keys[id]; ok {
		return k, true
	}
	if t.pending == "" {
		return nil, false
	}
	k := t.late.Load()
	if k == nil {
		t.mu.Lock()
		if k = t.late.Load(); k == nil {
			// Not there yet (no worker made it) or unreadable: the
			// next unknown key tries again.
			if s, err := readPrivateKey(t.pending); err == nil {
				pub := s.PublicKey()
				t.late.Store(&pub)
				k = &pub
			}
		}
		t.mu.Unlock()
	}
	if k != nil && IDOf(*k) == id {
		return *k, true
	}
	return nil, false
}

// verifyRaw checks raw, a decoded proof, of msg.
func (t *Trust) verifyRaw(raw []byte, msg []byte) error {
	if raw[0] != version {
		return fmt.Errorf("%w: proof version %d", ErrUnproven, raw[0])
	}
	id := KeyID(raw[1:9])
	pub, ok := t.key(id)
	if !ok {
		return fmt.Errorf("%w: signed by key %s, which is not trusted", ErrUnproven, id)
	}
	if !ed25519.Verify(pub, msg, raw[9:]) {
		return fmt.Errorf("%w: the signature by key %s does not match", ErrUnproven, id)
	}
	return nil
}

// VerifyResults checks proof, the Header of the results message of batch
// index of job whose body is data. Errors match ErrUnproven.
func (t *Trust) VerifyResults(proof, job string, index uint64, data []byte) error {
	return t.verify(proof, resultsMsg(job, index, data))
}

// VerifyReply checks proof, the Header of a solve reply whose body is
// data. Errors match ErrUnproven.
func (t *Trust) VerifyReply(proof string, data []byte) error {
	return t.verify(proof, replyMsg(data))
}

// GenerateKey returns a new private key.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("proof: generate a key: %w", err)
	}
	return k, nil
}

// MarshalPrivateKey returns key as a PEM "PRIVATE KEY" block (PKCS #8),
// the form of the file proof.key names.
func MarshalPrivateKey(key ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("proof: encode the private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// MarshalPublicKeys returns keys as PEM "PUBLIC KEY" blocks (PKIX), the
// form of the file proof.trusted names.
func MarshalPublicKeys(keys ...ed25519.PublicKey) ([]byte, error) {
	var out []byte
	for _, k := range keys {
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			return nil, fmt.Errorf("proof: encode a public key: %w", err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	return out, nil
}

// ParsePrivateKey parses MarshalPrivateKey's form; name says where it
// came from in errors.
func ParsePrivateKey(data []byte, name string) (ed25519.PrivateKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("proof: %s: no PEM \"PRIVATE KEY\" block", name)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("proof: %s: %w", name, err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("proof: %s: a %T, not an ed25519 key", name, k)
	}
	return ek, nil
}

// ParsePublicKeys parses MarshalPublicKeys's form: one or more "PUBLIC
// KEY" blocks, each an ed25519 key; name says where it came from.
func ParsePublicKeys(data []byte, name string) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for n := 1; ; n++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("proof: %s: block %d is a %q, not a \"PUBLIC KEY\"", name, n, b.Type)
		}
		k, err := x509.ParsePKIXPublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("proof: %s: block %d: %w", name, n, err)
		}
		ek, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("proof: %s: block %d is a %T, not an ed25519 key", name, n, k)
		}
		keys = append(keys, ek)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("proof: %s: no PEM \"PUBLIC KEY\" block", name)
	}
	return keys, nil
}

// LoadSigner reads the private key file path (proof.key); "" gives a nil
// Signer (sign nothing).
func LoadSigner(path string) (*Signer, error) {
	if path == "" {
		return nil, nil
	}
	return readPrivateKey(path)
}

// readPrivateKey reads the private key file path.
func readPrivateKey(path string) (*Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("proof: proof.key: %w", err)
	}
	k, err := ParsePrivateKey(data, "proof.key "+path)
	if err != nil {
		return nil, err
	}
	return NewSigner(k), nil
}

// LoadTrust reads the trusted public keys file path (proof.trusted); ""
// gives a nil Trust (trust no key).
func LoadTrust(path string) (*Trust, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("proof: proof.trusted: %w", err)
	}
	keys, err := ParsePublicKeys(data, "proof.trusted "+path)
	if err != nil {
		return nil, err
	}
	return NewTrust(keys...), nil
}
