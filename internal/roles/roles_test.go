package roles_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/roles"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		user string
		want roles.Role
		ok   bool
	}{
		{"admin", roles.Admin, true},
		{"producer", roles.Producer, true},
		{"producer-berlin", roles.Producer, true},
		{"worker-2", roles.Worker, true},
		{"reader-grafana", roles.Reader, true},
		{"sudoku", "", false},
		{"producers", "", false},
		{"", "", false},
	} {
		r, ok := roles.Of(tc.user)
		if ok != tc.ok || ok && r != tc.want {
			t.Errorf("Of(%q) = %q, %v; want %q, %v", tc.user, r, ok, tc.want, tc.ok)
		}
		if err := roles.CheckUser(tc.user); (err == nil) != tc.ok {
			t.Errorf("CheckUser(%q) = %v", tc.user, err)
		}
	}
	if err := roles.CheckUser("producer-a b"); err == nil {
		t.Error("CheckUser accepts a space")
	}
}

// TestInit: the files hold hashes, never a password; a second run keeps
// the passwords and adds a user.
func TestInit(t *testing.T) {
	dir := t.TempDir()
	n := roles.NamesOf(queue.Options{}, "")
	first, err := roles.Init(dir, n, roles.InitOptions{Owner: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != len(roles.All) {
		t.Fatalf("%d users, want the %d roles'", len(first), len(roles.All))
	}
	second, err := roles.Init(dir, n, roles.InitOptions{Users: []string{"producer-berlin"}, Owner: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != len(roles.All)+1 || second[3].Name != "producer-berlin" || second[3].Role != roles.Producer {
		t.Fatalf("users after adding producer-berlin: %+v", second)
	}
	var server string
	for _, f := range []string{roles.NATSConfFile, roles.RedisACLFile} {
		data, err := os.ReadFile(filepath.Join(dir, roles.ServerDir, f))
		if err != nil {
			t.Fatal(err)
		}
		server += string(data)
	}
	for _, u := range second {
		if strings.Contains(server, u.NATSPassword) || strings.Contains(server, u.RedisPassword) {
			t.Errorf("the server files show a password of %s", u.Name)
		}
		data, err := os.ReadFile(filepath.Join(dir, u.Name, roles.NATSPasswordFile))
		if err != nil || strings.TrimSpace(string(data)) != u.NATSPassword {
			t.Errorf("%s's nats_password: %q, %v", u.Name, data, err)
		}
		if fi, err := os.Stat(filepath.Join(dir, u.Name, roles.RedisPasswordFile)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s's redis_password: %v, %v", u.Name, fi.Mode(), err)
		}
	}
	kept := map[string]string{}
	for _, u := range first {
		kept[u.Name] = u.NATSPassword + u.RedisPassword
	}
	for _, u := range second {
		if k, ok := kept[u.Name]; ok && k != u.NATSPassword+u.RedisPassword {
			t.Errorf("the passwords of %s changed", u.Name)
		}
	}
}

// TestPermissionErrorText shows how a refusal prints.
func TestPermissionErrorText(t *testing.T) {
	ref := roles.NewRefusals("reader-grafana")
	if _, ok := ref.Note(errors.New("nats: slow consumer")); ok {
		t.Error("a slow consumer noted as a refusal")
	}
	violation := fmt.Errorf("%w: %s", nats.ErrPermissionViolation, `Permissions Violation for Publish to "$JS.API.STREAM.PURGE.SUDOKU"`)
	if _, ok := ref.Note(violation); !ok {
		t.Fatal("a permissions violation not noted")
	}
	err := ref.Explain(fmt.Errorf("purge: %w", nats.ErrTimeout))
	want := `NATS refused user "reader-grafana" (role reader): publish to "$JS.API.STREAM.PURGE.SUDOKU" is not allowed: purge: nats: timeout`
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
	if !errors.Is(err, nats.ErrTimeout) {
		t.Error("the operation's error is not wrapped")
	}
	if again := ref.Explain(err); again != err {
		t.Errorf("explained twice: %v", again)
	}
	// A command's error is explained only by a refusal since it started.
	plain := errors.New("context deadline exceeded")
	if got := roles.ExplainSince(time.Now().Add(time.Hour), plain); got != plain {
		t.Errorf("explained by an older refusal: %v", got)
	}
	if got := roles.ExplainSince(time.Now().Add(-time.Hour), plain); !strings.Contains(got.Error(), `user "reader-grafana"`) {
		t.Errorf("not explained by the latest refusal: %v", got)
	}
}

// TestComposeNATSConf: docker-compose.yml's nats-server configuration
// (configs/nats-server.conf, the roles' users included from roles/ beside
// it, as the compose file mounts them) is one that nats-server takes: the
// module's parser and, when installed, Debian's 2.9 binary (-t).
func TestComposeNATSConf(t *testing.T) {
	root := t.TempDir()
	if _, err := roles.Init(filepath.Join(root, "secrets"), roles.NamesOf(queue.Options{}, ""), roles.InitOptions{Owner: -1}); err != nil {
		t.Fatal(err)
	}
	etc := filepath.Join(root, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../configs/nats-server.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(etc, "sudoku.conf")
	if err := os.WriteFile(conf, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "secrets", roles.ServerDir), filepath.Join(etc, "roles")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SUDOKU_NATS_NAME", "nats2")
	o, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if o.ServerName != "nats2" || !o.JetStream || o.Cluster.Name != "sudoku" || len(o.Routes) != 3 || len(o.Users) != len(roles.All) {
		t.Errorf("server %q, JetStream %v, cluster %q with %d routes, %d users; want nats2, true, sudoku, 3, 5",
			o.ServerName, o.JetStream, o.Cluster.Name, len(o.Routes), len(o.Users))
	}
	for _, u := range o.Users {
		if u.Permissions == nil || len(u.Permissions.Publish.Allow) == 0 {
			t.Errorf("user %s has no publish permissions", u.Username)
		}
	}
	if bin, err := exec.LookPath("/usr/sbin/nats-server"); err == nil {
		if out, err := exec.Command(bin, "-c", conf, "-t").CombinedOutput(); err != nil {
			t.Errorf("nats-server 2.9 -t: %v: %s", err, out)
		}
	}
}

// TestReadsBySequence: the users whose permissions let them read the jobs
// bucket by sequence (admin, worker, reader) are those the job store may send to
// the bucket's leader; the others read by key alone (issue 28: a
// producer's refusal would stop its command), and the store knows it.
func TestReadsBySequence(t *testing.T) {
	for _, tc := range []struct {
		user string
		want bool
	}{
		{"", true}, {"admin", true}, {"admin-ops", true}, {"worker", true}, {"worker-gpu", true},
		{"reader-dash", true}, {"producer", false}, {"producer-alice", false}, {"gateway", false},
	} {
		if got := roles.ReadsBySequence(tc.user); got != tc.want {
			t.Errorf("ReadsBySequence(%q) = %v, want %v", tc.user, got, tc.want)
		}
		if got := job.ReadsBySequence(tc.user); got != tc.want {
			t.Errorf("job.ReadsBySequence(%q) = %v, want %v (the roles package's)", tc.user, got, tc.want)
		}
	}
}
