package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

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
	)
	c := &cobra.Command{
		Use:   "init DIR",
		Short: "Make or update a folder of users, passwords and server configuration",
		Long: `Make DIR a roles folder, or bring it up to date. DIR/USER/ holds each user's
passwords, nats_password and redis_password (made at random when missing,
kept otherwise; readable by their owner only): give them to that user's
processes with nats.user, nats.password_file, redis.username and
redis.password_file. DIR/server/ holds what the servers read, made anew each
time from the passwords (as hashes) and the configuration's names (streams,
subject prefix, Redis key prefix):

  nats-users.conf   nats-server -c DIR/server/nats-users.conf (or include it)
  redis-users.acl   redis-server --aclfile DIR/server/redis-users.acl

The users are admin, producer, gateway, worker and reader, those DIR has already,
and each --user. After adding a user, reload the servers: nats-server
--signal reload (or SIGHUP), and redis-cli ACL LOAD as admin.`,
		Example: `  sudoku roles init secrets
  sudoku roles init --user producer-berlin secrets   # one more producer`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			n := roles.NamesOf(app.QueueOptions(cfg.Queue, cfg.Job.ResultTTL), cfg.Redis.KeyPrefix)
			us, err := roles.Init(args[0], n, roles.InitOptions{Users: users, Owner: owner, SharedReads: shared})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, u := range us {
				fmt.Fprintf(w, "%-20s role %-8s %s\n", u.Name, u.Role, filepath.Join(args[0], u.Name))
			}
			fmt.Fprintf(w, "servers: %s, %s\n", filepath.Join(args[0], roles.ServerDir, roles.NATSConfFile),
				filepath.Join(args[0], roles.ServerDir, roles.RedisACLFile))
			return nil
		},
	}
	c.Flags().StringArrayVar(&users, "user", nil, "add a `USER` (a role's name, or one followed by '-' and a name of your own)")
	c.Flags().BoolVar(&shared, "shared-reads", false, "let every producer read every producer's jobs (never change them)")
	c.Flags().IntVar(&owner, "owner", -1, "give each user's folder and passwords to this `UID` (a container's user)")
	return c
}
