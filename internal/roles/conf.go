package roles

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// User is one user of the servers: its name, its role and its passwords
// (one for NATS, one for Redis).
type User struct {
	Name          string
	Role          Role
	NATSPassword  string
	RedisPassword string
}

// NATSConf returns a nats-server configuration file that holds only an
// authorization block: each user with its permissions (NATS) and its
// password as a bcrypt hash, so the file reveals no password. Give it to
// nats-server with -c (command-line flags add to it) or include it from
// the server's own file. nats-server 2.9 and later read it.
func NATSConf(users []User, n Names, shared bool) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# sudoku-queue roles (written by `sudoku roles init`; changes are lost when it runs again).\n")
	fmt.Fprintf(&b, "# Streams %s, %s, %s, bucket %s, subjects %s.>.\n", n.Stream, n.Results, n.DLQ, n.Bucket, n.Prefix)
	b.WriteString("authorization {\n  users = [\n")
	for _, u := range users {
		hash, err := bcrypt.GenerateFromPassword([]byte(u.NATSPassword), bcrypt.DefaultCost)
		if err != nil {
			return nil, fmt.Errorf("roles: hash the NATS password of %s: %w", u.Name, err)
		}
		p := NATS(u.Name, n, shared)
		fmt.Fprintf(&b, "    # %s: role %s\n", u.Name, u.Role)
		fmt.Fprintf(&b, "    {\n      user: %s\n      password: %s\n      permissions: {\n", strconv.Quote(u.Name), strconv.Quote(string(hash)))
		writePerm(&b, "publish", p.Publish, p.DenyPublish)
		writePerm(&b, "subscribe", p.Subscribe, p.DenySubscribe)
		if p.AllowResponses {
			b.WriteString("        allow_responses: true\n")
		}
		b.WriteString("      }\n    }\n")
	}
	b.WriteString("  ]\n}\n")
	return b.Bytes(), nil
}

// writePerm writes one permission (publish or subscribe) of a user.
func writePerm(b *bytes.Buffer, name string, allow, deny []string) {
	fmt.Fprintf(b, "        %s: {\n", name)
	list := func(key string, subjects []string) {
		if len(subjects) == 0 {
			return
		}
		fmt.Fprintf(b, "          %s: [\n", key)
		for _, s := range subjects {
			// Quoted: a bare $JS... would be a variable.
			fmt.Fprintf(b, "            %s\n", strconv.Quote(s))
		}
		b.WriteString("          ]\n")
	}
	list("allow", allow)
	list("deny", deny)
	b.WriteString("        }\n")
}

// RedisACL returns a Redis ACL file (redis-server --aclfile) with each
// user's rules (Redis) and its password as a SHA-256 hash, so the file
// reveals no password. The default user may only PING (health checks);
// every other command needs a user's password.
func RedisACL(users []User, n Names) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "user default on nopass resetkeys resetchannels -@all +ping\n")
	for _, u := range users {
		sum := sha256.Sum256([]byte(u.RedisPassword))
		fmt.Fprintf(&b, "user %s on #%s %s\n", u.Name, hex.EncodeToString(sum[:]), strings.Join(Redis(u.Role, n), " "))
	}
	return b.Bytes()
}
