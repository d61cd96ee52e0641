package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/roles"
)

func init() { addCommand(newRolesCmd) }

// newRolesCmd returns the sudoku roles command and its subcommands.
func newRolesCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "roles",
		Short: "Users and permissions of the NATS and Redis servers, one role each",
		Long: `Each process connects to NATS and Redis as a user with one of five roles:

  admin     stream and bucket set-up, 'job rm' of any job, 'dlq replay',
            everything else
  producer  submit jobs of its own; follow, cancel and remove them; read
            the cache. Nothing of another producer's jobs (see --shared-reads)
  gateway   a producer acting for others: 'sudoku serve' with a token per
            principal, which checks that each caller touches its own jobs
  worker    pull work, publish results and dead letters, answer the micro
            service (solve, submit, status, cancel), read and write the
            cache's keys; never delete stored results
  reader    read every job: dashboards, 'get', 'job status', a read-only
            HTTP API

A user's role is its name or the part before its first '-' (producer-berlin
is a producer), so each person, program or machine can have its own
credential. A user owns the jobs it submits: their subjects and keys carry
its name, and the servers let no other producer touch them.`,
	}
	c.AddCommand(newRolesInitCmd())
	return c
}

func newRolesInitCmd() *cobra.Command {
	var (
		users  []string
		owner  int
		shared bool
		srv    roles.ServerConf
	)
	c := &cobra.Command{
		Use:   "init DIR",
		Short: "Make or update a folder of users, passwords and server configuration",
		Long: `Make DIR a roles folder, or bring it up to date. DIR/USER/ holds each user's
passwords, nats_password and redis_password (made at random when missing,
kept otherwise; readable by their owner only): give them to that user's
processes with nats.user, nats.password_file, redis.username and
redis.password_file. A worker user's folder also holds its proof key,
proof_key.pem (give it as proof.key: the worker signs what it produces),
and DIR/proof_trusted.pem the public keys of them all (give it to every
other process as proof.trusted: it takes a unique or gave_up answer only
with a proof by one of them). DIR/server/ holds what the servers read:

  nats-server.conf  the whole nats-server configuration: where it listens,
                    JetStream and its folder, the cluster if any, and the
                    users (include "nats-users.conf"). Written when missing
                    or from the --nats-* flags; kept otherwise, edits
                    included.
  nats-users.conf   the users and their permissions, passwords as hashes
  redis-users.acl   the Redis users, passwords as hashes

The users' files are made anew each time from the passwords and the
configuration's names (streams, subject prefix, Redis key prefix). The
users are admin, producer, gateway, worker and reader, those DIR has
already, and each --user.

Start the servers with these files alone (it prints the commands, with
DIR's full path):

  nats-server -c DIR/server/nats-server.conf
  redis-server --aclfile DIR/server/redis-users.acl --bind 0.0.0.0

No -js or -sd: a reload reads only the file, and JetStream must be in it
(it is). After adding a user, reload both: nats-server --signal reload (or
SIGHUP), and redis-cli --user admin --askpass ACL LOAD with the admin's
redis_password.`,
		Example: `  sudoku roles init --nats-store-dir /var/lib/nats secrets
  nats-server -c secrets/server/nats-server.conf
  sudoku roles init --user producer-berlin secrets   # one more producer; then reload`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			dir, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			n := roles.NamesOf(app.QueueOptions(cfg.Queue, cfg.Job.ResultTTL), cfg.Redis.KeyPrefix)
			opts := roles.InitOptions{Users: users, Owner: owner, SharedReads: shared}
			serverFlag := false
			cmd.Flags().Visit(func(f *pflag.Flag) {
				serverFlag = serverFlag || strings.HasPrefix(f.Name, "nats-") && f.Name != "nats-url"
			})
			if serverFlag {
				opts.Server = &srv
			}
			server := filepath.Join(dir, roles.ServerDir)
			how := "kept"
			switch _, err := os.Stat(filepath.Join(server, roles.NATSServerFile)); {
			case serverFlag:
				how = "written from the flags"
			case errors.Is(err, fs.ErrNotExist):
				how = fmt.Sprintf("written: listen %s, JetStream in %s", roles.DefaultListen, roles.DefaultStoreDir)
			}
			us, err := roles.Init(dir, n, opts)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, u := range us {
				fmt.Fprintf(w, "%-20s role %-8s %s\n", u.Name, u.Role, filepath.Join(dir, u.Name))
			}
			fmt.Fprintf(w, "\nproof keys: each worker user's %s (give it as proof.key); every reader's proof.trusted: %s\n",
				roles.ProofKeyFile, filepath.Join(dir, roles.ProofTrustedFile))
			fmt.Fprintf(w, "\nservers' files in %s: %s (%s), %s, %s\n", server, roles.NATSServerFile, how, roles.NATSConfFile, roles.RedisACLFile)
			fmt.Fprintf(w, "start the servers with them, no other flag:\n")
			fmt.Fprintf(w, "  nats-server -c %s\n", filepath.Join(server, roles.NATSServerFile))
			fmt.Fprintf(w, "  redis-server --aclfile %s --bind 0.0.0.0\n", filepath.Join(server, roles.RedisACLFile))
			fmt.Fprintf(w, "after adding a user, reload them:\n")
			fmt.Fprintf(w, "  nats-server --signal reload   (or kill -HUP the server's pid)\n")
			fmt.Fprintf(w, "  redis-cli --user admin --askpass ACL LOAD   (the password: %s)\n", filepath.Join(dir, "admin", roles.RedisPasswordFile))
			return nil
		},
	}
	c.Flags().StringArrayVar(&users, "user", nil, "add a `USER` (a role's name, or one followed by '-' and a name of your own)")
	c.Flags().BoolVar(&shared, "shared-reads", false, "let every producer read every producer's jobs (never change them)")
	c.Flags().IntVar(&owner, "owner", -1, "give each user's folder and passwords to this `UID` (a container's user)")
	c.Flags().StringVar(&srv.Listen, "nats-listen", roles.DefaultListen, "nats-server.conf: the `host:port` clients connect to")
	c.Flags().StringVar(&srv.StoreDir, "nats-store-dir", roles.DefaultStoreDir, "nats-server.conf: JetStream's `folder`")
	c.Flags().StringVar(&srv.Name, "nats-server-name", "", "nats-server.conf: the server's `name` (one each in a cluster)")
	c.Flags().StringVar(&srv.Monitor, "nats-monitor", "", "nats-server.conf: serve /healthz, /varz, /jsz on this `host:port` (default: off)")
	c.Flags().StringVar(&srv.Cluster, "nats-cluster", "", "nats-server.conf: the `name` of the JetStream cluster the server is one of")
	c.Flags().StringVar(&srv.ClusterListen, "nats-cluster-listen", "", "nats-server.conf: where the server takes the cluster's routes, `host:port` (default 0.0.0.0:6222)")
	c.Flags().StringArrayVar(&srv.Routes, "nats-route", nil, "nats-server.conf: a cluster server's `URL` (nats-route://host:6222), each of them")
	return c
}
