package roles

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"path/filepath"
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
// password as a bcrypt hash, so the file reveals no password. Include it
// from the server's own file (NATSServerConf does); given alone to
// nats-server -c, JetStream would come from flags, and a reload, which
// reads only the file, would turn it off. nats-server 2.9 and later read
// it.
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

// The defaults of ServerConf: nats-server's own client port, and the
// folder the README's deployment keeps JetStream in.
const (
	DefaultListen   = "0.0.0.0:4222"
	DefaultStoreDir = "/var/lib/nats"
)

// ServerConf are the settings of the nats-server configuration file that
// Init writes (NATSServerConf): everything a server of the deployment
// needs, so that it starts from the file alone and a reload, which reads
// only the file, keeps JetStream on.
type ServerConf struct {
	// Listen is the host:port clients connect to (default DefaultListen).
	Listen string
	// StoreDir is JetStream's folder (default DefaultStoreDir), made
	// absolute: nats-server would take a relative one from its working
	// directory.
	StoreDir string
	// Name is the server's name (server_name); one each in a cluster.
	Name string
	// Monitor is the host:port of the monitoring endpoint (/healthz,
	// /jsz); "" for none.
	Monitor string
	// Cluster is the name of the cluster the server is one of; "" for a
	// single server. ClusterListen is where it takes the routes of the
	// others (default 0.0.0.0:6222), Routes their nats-route://host:port
	// URLs (every server's, itself included, as nats-server allows).
	Cluster       string
	ClusterListen string
	Routes        []string
}

// withDefaults returns c with its defaults, or why it cannot be written.
func (c ServerConf) withDefaults() (ServerConf, error) {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.StoreDir == "" {
		c.StoreDir = DefaultStoreDir
	}
	abs, err := filepath.Abs(c.StoreDir)
	if err != nil {
		return c, fmt.Errorf("roles: JetStream folder %q: %w", c.StoreDir, err)
	}
	c.StoreDir = abs
	for _, a := range []struct{ what, addr string }{{"listen", c.Listen}, {"monitor", c.Monitor}, {"cluster listen", c.ClusterListen}} {
		if a.addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return c, fmt.Errorf("roles: nats-server %s address %q: want host:port: %w", a.what, a.addr, err)
		}
	}
	if c.Cluster == "" && (c.ClusterListen != "" || len(c.Routes) > 0) {
		return c, errors.New("roles: nats-server routes without a cluster name")
	}
	if c.Cluster != "" {
		if c.Name == "" {
			return c, errors.New("roles: a nats-server of a JetStream cluster needs a name of its own (server_name)")
		}
		if c.ClusterListen == "" {
			c.ClusterListen = "0.0.0.0:6222"
		}
	}
	return c, nil
}

// NATSServerConf returns the nats-server configuration file of one server
// of the deployment: where it listens, JetStream and its folder, the
// cluster if any, and the users (NATSConfFile, included from beside it).
// Start the server with it alone, no flags: nats-server -c FILE. A reload
// (nats-server --signal reload, or SIGHUP) reads it again, with the users
// Init rewrote, and keeps JetStream on.
func NATSServerConf(c ServerConf) ([]byte, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(`# nats-server configuration for sudoku-queue, written by 'sudoku roles init'
# when it was missing or from its --nats-* flags; other runs keep it, edits
# included. Start the server with this file alone, no other flag:
#
#   nats-server -c ` + NATSServerFile + `
#
# and reload it (a user added, this file changed) with
# 'nats-server --signal reload' or SIGHUP: a reload reads only this file,
# so JetStream must be set here, not with -js or -sd.

`)
	if c.Name != "" {
		fmt.Fprintf(&b, "server_name: %s\n", strconv.Quote(c.Name))
	}
	fmt.Fprintf(&b, "listen: %s\n", strconv.Quote(c.Listen))
	if c.Monitor != "" {
		fmt.Fprintf(&b, "# /healthz, /varz, /jsz\nhttp: %s\n", strconv.Quote(c.Monitor))
	}
	fmt.Fprintf(&b, "\njetstream {\n  store_dir: %s\n}\n", strconv.Quote(c.StoreDir))
	if c.Cluster != "" {
		fmt.Fprintf(&b, "\ncluster {\n  name: %s\n  listen: %s\n", strconv.Quote(c.Cluster), strconv.Quote(c.ClusterListen))
		if len(c.Routes) > 0 {
			b.WriteString("  routes: [\n")
			for _, r := range c.Routes {
				fmt.Fprintf(&b, "    %s\n", strconv.Quote(r))
			}
			b.WriteString("  ]\n")
		}
		b.WriteString("}\n")
	}
	fmt.Fprintf(&b, "\n# The users, one per role, with their permissions (rewritten by each\n# 'sudoku roles init').\ninclude %s\n", strconv.Quote(NATSConfFile))
	return b.Bytes(), nil
}
