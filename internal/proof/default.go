package proof

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// DefaultDirName is the directory of the default key under the user's
// configuration directory (os.UserConfigDir: $XDG_CONFIG_HOME or
// ~/.config on Linux).
const DefaultDirName = "sudoku-queue"

// DefaultKeyName is the file name of the default key, the one a worker
// signs with when proof.key is unset (and proof.default is on), and
// whose public key a reader trusts when proof.trusted is unset: so that
// a worker and a reader run by one user on one host agree with no set-up,
// as ssh's default keys do.
const DefaultKeyName = "proof_key.pem"

// DefaultKeyPath returns the path of the default key:
// os.UserConfigDir()/sudoku-queue/proof_key.pem.
func DefaultKeyPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("proof: the default key's directory: %w", err)
	}
	return filepath.Join(dir, DefaultDirName, DefaultKeyName), nil
}

// LoadOrCreateKey returns the Signer of the private key file path,
// making the file (mode 0600, its directory 0700 if missing) with a new
// key when it does not exist; created says it did. The file appears
// whole or not at all: the key is written to a temporary file in the
// same directory and linked to path, which fails if path exists; so two
// processes making it at once end with one key, the one both read back.
func LoadOrCreateKey(path string) (s *Signer, created bool, err error) {
	if s, err := readPrivateKey(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return s, false, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("proof: make the default key's directory: %w", err)
	}
	k, err := GenerateKey()
	if err != nil {
		return nil, false, err
	}
	data, err := MarshalPrivateKey(k)
	if err != nil {
		return nil, false, err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, false, fmt.Errorf("proof: make the default key: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	// CreateTemp makes the file 0600; say so anyway, whatever the umask.
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return nil, false, fmt.Errorf("proof: make the default key: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return nil, false, fmt.Errorf("proof: make the default key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return nil, false, fmt.Errorf("proof: make the default key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, false, fmt.Errorf("proof: make the default key: %w", err)
	}
	// Link, unlike rename, never replaces: the first to link wins, and
	// every process reads back the same file.
	switch err := os.Link(tmp.Name(), path); {
	case err == nil:
		created = true
	case errors.Is(err, fs.ErrExist):
	default:
		return nil, false, fmt.Errorf("proof: make the default key: %w", err)
	}
	s, err = readPrivateKey(path)
	if err != nil {
		return nil, false, err
	}
	return s, created, nil
}

// DefaultTrust returns a Trust of the public key of the private key file
// path (the default key, DefaultKeyPath), read when a proof first needs
// it: the file may not exist yet when a reader starts, and be made by a
// worker started after it. A Trust whose file never appears trusts no
// key, and its reader confirms by solving.
func DefaultTrust(path string) *Trust {
	t := NewTrust()
	t.pending = path
	return t
}
