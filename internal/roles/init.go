package roles

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sudoku-queue/sudoku-queue/internal/proof"
)

// Files of a roles directory (see Init).
const (
	// ServerDir holds the servers' files, which reveal no password.
	ServerDir = "server"
	// NATSServerFile is the nats-server configuration to start a server
	// with (NATSServerConf): JetStream, and the users of NATSConfFile.
	NATSServerFile = "nats-server.conf"
	// NATSConfFile is the users' part of the nats-server configuration
	// (NATSConf), included by NATSServerFile.
	NATSConfFile = "nats-users.conf"
	// RedisACLFile is the Redis ACL file (RedisACL).
	RedisACLFile = "redis-users.acl"
	// NATSPasswordFile and RedisPasswordFile, in a user's folder, hold
	// its passwords: point nats.password_file and redis.password_file at
	// them.
	NATSPasswordFile  = "nats_password"
	RedisPasswordFile = "redis_password"
	// ProofKeyFile, in a worker user's folder, is its proof key (an
	// ed25519 private key, PEM): point proof.key at it.
	ProofKeyFile = "proof_key.pem"
	// ProofTrustedFile, in the roles folder itself, holds the public
	// keys of every worker user's ProofKeyFile: point every reader's
	// (producer, gateway, reader) proof.trusted at it.
	ProofTrustedFile = "proof_trusted.pem"
)

// InitOptions tune Init.
type InitOptions struct {
	// Users to add to those of the folder; the four roles' own users
	// (admin, producer, worker, reader) are always there.
	Users []string
	// SharedReads lets every producer read every producer's jobs (their
	// records and results), not only its own; none may change another's.
	SharedReads bool
	// Owner, when not negative, is the user id that gets each user's
	// folder and password files (a container's user); the server files
	// stay readable by all (they hold hashes only).
	Owner int
	// Server, when set, is written as the nats-server configuration
	// (NATSServerFile), replacing the one there. Nil keeps the one there,
	// or writes the defaults' when there is none.
	Server *ServerConf
}

// Init makes dir a roles folder, or brings it up to date: dir/<user>/ holds
// the passwords of each user (nats_password, redis_password; made at
// random when missing, kept otherwise), and dir/server/ the NATS and Redis
// configuration that grants each user its role (NATSConf, RedisACL), made
// anew from those passwords and n each time, and the nats-server
// configuration that includes the users' (NATSServerConf: written when
// missing or opts.Server is set, kept otherwise). Each worker user's
// folder holds its proof key (ProofKeyFile: made when missing, kept
// otherwise), and dir/ProofTrustedFile their public keys, made anew each
// time, with a copy in every other user's folder. The users are the four
// roles', those whose folders dir holds already, and opts.Users. It
// returns them, sorted by name.
func Init(dir string, n Names, opts InitOptions) ([]User, error) {
	var serverConf []byte
	serverPath := filepath.Join(dir, ServerDir, NATSServerFile)
	if _, err := os.Stat(serverPath); opts.Server != nil || errors.Is(err, fs.ErrNotExist) {
		// Made first: a bad setting changes nothing.
		var c ServerConf
		if opts.Server != nil {
			c = *opts.Server
		}
		if serverConf, err = NATSServerConf(c); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("roles: %w", err)
	}
	names := make([]string, 0, len(All)+len(opts.Users))
	for _, r := range All {
		names = append(names, string(r))
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("roles: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != ServerDir && CheckUser(e.Name()) == nil {
			names = append(names, e.Name())
		}
	}
	for _, u := range opts.Users {
		if err := CheckUser(u); err != nil {
			return nil, err
		}
		names = append(names, u)
	}
	slices.Sort(names)
	names = slices.Compact(names)

	if err := os.MkdirAll(filepath.Join(dir, ServerDir), 0o755); err != nil {
		return nil, fmt.Errorf("roles: %w", err)
	}
	// The servers' folder may have been made by docker for a bind mount.
	if err := os.Chmod(filepath.Join(dir, ServerDir), 0o755); err != nil {
		return nil, fmt.Errorf("roles: %w", err)
	}
	users := make([]User, 0, len(names))
	var workerKeys []ed25519.PublicKey
	for _, name := range names {
		role, _ := Of(name)
		u := User{Name: name, Role: role}
		udir := filepath.Join(dir, name)
		if err := os.MkdirAll(udir, 0o700); err != nil {
			return nil, fmt.Errorf("roles: %w", err)
		}
		if u.NATSPassword, err = password(filepath.Join(udir, NATSPasswordFile)); err != nil {
			return nil, err
		}
		if u.RedisPassword, err = password(filepath.Join(udir, RedisPasswordFile)); err != nil {
			return nil, err
		}
		owned := []string{udir, filepath.Join(udir, NATSPasswordFile), filepath.Join(udir, RedisPasswordFile)}
		if role == Worker {
			pub, err := proofKey(filepath.Join(udir, ProofKeyFile))
			if err != nil {
				return nil, err
			}
			workerKeys = append(workerKeys, pub)
			owned = append(owned, filepath.Join(udir, ProofKeyFile))
		}
		if opts.Owner >= 0 {
			for _, p := range owned {
				if err := os.Chown(p, opts.Owner, -1); err != nil {
					return nil, fmt.Errorf("roles: %w", err)
				}
			}
		}
		users = append(users, u)
	}
	trusted, err := proof.MarshalPublicKeys(workerKeys...)
	if err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, ProofTrustedFile), trusted, 0o644); err != nil {
		return nil, err
	}
	// A copy in each reader's folder (every user but a worker), so that
	// the folder alone (a Kubernetes Secret made of it, a bind mount) is
	// all a process of that user needs.
	for _, u := range users {
		if u.Role == Worker {
			continue
		}
		p := filepath.Join(dir, u.Name, ProofTrustedFile)
		if err := writeFile(p, trusted, 0o644); err != nil {
			return nil, err
		}
		if opts.Owner >= 0 {
			if err := os.Chown(p, opts.Owner, -1); err != nil {
				return nil, fmt.Errorf("roles: %w", err)
			}
		}
	}
	conf, err := NATSConf(users, n, opts.SharedReads)
	if err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, ServerDir, NATSConfFile), conf, 0o644); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, ServerDir, RedisACLFile), RedisACL(users, n), 0o644); err != nil {
		return nil, err
	}
	// After the users' file it includes, so a server never reads one
	// without the other.
	if serverConf != nil {
		if err := writeFile(serverPath, serverConf, 0o644); err != nil {
			return nil, err
		}
	}
	return users, nil
}

// password returns the password in the file at path, first writing a new
// random one there (readable by its owner only) when there is none.
func password(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		if p := strings.TrimSpace(string(data)); p != "" {
			return p, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("roles: %w", err)
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("roles: %w", err)
	}
	p := base64.RawURLEncoding.EncodeToString(b[:])
	if err := writeFile(path, []byte(p+"\n"), 0o600); err != nil {
		return "", err
	}
	return p, nil
}

// proofKey returns the public key of the proof key in the file at path,
// first writing a new one there (readable by its owner only) when there
// is none.
func proofKey(path string) (ed25519.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		k, err := proof.ParsePrivateKey(data, path)
		if err != nil {
			return nil, fmt.Errorf("roles: %w", err)
		}
		return k.Public().(ed25519.PublicKey), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("roles: %w", err)
	}
	k, err := proof.GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("roles: %w", err)
	}
	pem, err := proof.MarshalPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("roles: %w", err)
	}
	if err := writeFile(path, pem, 0o600); err != nil {
		return nil, err
	}
	return k.Public().(ed25519.PublicKey), nil
}

// writeFile replaces the file at path with data, atomically.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("roles: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("roles: %w", err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("roles: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("roles: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("roles: %w", err)
	}
	return nil
}
