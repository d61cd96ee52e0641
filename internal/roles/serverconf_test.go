package roles_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/roles"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// TestNATSServerConfReload: the nats-server configuration Init writes is
// complete: the nats-server module starts from it alone with JetStream in
// the folder given and the roles' users, and a reload (which reads only
// the file) keeps JetStream on. (Given alone, the users' file had no
// jetstream block, so a reload turned JetStream off: issue 28.)
func TestNATSServerConfReload(t *testing.T) {
	dir := t.TempDir()
	store := t.TempDir()
	port := testenv.FreePort(t)
	first, err := roles.Init(dir, names, roles.InitOptions{Owner: -1,
		Server: &roles.ServerConf{Listen: fmt.Sprintf("127.0.0.1:%d", port), StoreDir: store}})
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, roles.ServerDir, roles.NATSServerFile)
	so, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("the nats-server module refuses %s: %v", conf, err)
	}
	if !so.JetStream || so.StoreDir != store || so.Host != "127.0.0.1" || so.Port != port || len(so.Users) != len(first) {
		t.Fatalf("%s: JetStream %v in %q, listen %s:%d, %d users; want true, %q, 127.0.0.1:%d, %d",
			conf, so.JetStream, so.StoreDir, so.Host, so.Port, len(so.Users), store, port, len(first))
	}
	so.NoLog, so.NoSigs = true, true
	ns, err := server.NewServer(so)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.JetStreamEnabled() {
		t.Fatal("JetStream off after the start")
	}
	// A user added, the file reloaded.
	us, err := roles.Init(dir, names, roles.InitOptions{Owner: -1, Users: []string{"producer-berlin"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if !ns.JetStreamEnabled() {
		t.Error("JetStream off after the reload")
	}
	for _, u := range us {
		if u.Name != "producer-berlin" {
			continue
		}
		nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo(u.Name, u.NATSPassword), nats.Timeout(30*time.Second))
		if err != nil {
			t.Fatalf("the user added before the reload: %v", err)
		}
		nc.Close()
	}
}

// TestNATSServerConfKept: Init writes the server's file when it is
// missing or settings are given, and keeps it (edits included) otherwise;
// a bad setting changes nothing. A cluster's file is one nats-server
// takes (the module and, when installed, Debian's 2.9 binary, -t).
func TestNATSServerConfKept(t *testing.T) {
	dir := t.TempDir()
	n := roles.NamesOf(queue.Options{}, "")
	if _, err := roles.Init(dir, n, roles.InitOptions{Owner: -1}); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, roles.ServerDir, roles.NATSServerFile)
	data, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`listen: "` + roles.DefaultListen + `"`, `store_dir: "` + roles.DefaultStoreDir + `"`, `include "nats-users.conf"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the default %s lacks %s:\n%s", roles.NATSServerFile, want, data)
		}
	}
	edited := append(data, "# an edit\nmax_payload: 2MB\n"...)
	if err := os.WriteFile(conf, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := roles.Init(dir, n, roles.InitOptions{Owner: -1, Users: []string{"reader-grafana"}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(conf); string(got) != string(edited) {
		t.Errorf("a run without settings changed %s", roles.NATSServerFile)
	}
	bad := &roles.ServerConf{Cluster: "sudoku"} // a cluster's server needs a name
	if _, err := roles.Init(dir, n, roles.InitOptions{Owner: -1, Server: bad}); err == nil || !strings.Contains(err.Error(), "server_name") {
		t.Errorf("a cluster without a server name: %v", err)
	}
	if got, _ := os.ReadFile(conf); string(got) != string(edited) {
		t.Errorf("a refused setting changed %s", roles.NATSServerFile)
	}

	cluster := &roles.ServerConf{Name: "nats2", Listen: "127.0.0.1:4222", StoreDir: "relative/js", Monitor: "127.0.0.1:8222",
		Cluster: "sudoku", Routes: []string{"nats-route://nats1:6222", "nats-route://nats2:6222", "nats-route://nats3:6222"}}
	us, err := roles.Init(dir, n, roles.InitOptions{Owner: -1, Server: cluster})
	if err != nil {
		t.Fatal(err)
	}
	o, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("relative/js")
	if o.ServerName != "nats2" || !o.JetStream || o.StoreDir != abs || o.Cluster.Name != "sudoku" || o.Cluster.Port != 6222 ||
		len(o.Routes) != 3 || o.HTTPPort != 8222 || len(o.Users) != len(us) {
		t.Errorf("server %q, JetStream %v in %q, cluster %q on %d with %d routes, monitor %d, %d users",
			o.ServerName, o.JetStream, o.StoreDir, o.Cluster.Name, o.Cluster.Port, len(o.Routes), o.HTTPPort, len(o.Users))
	}
	if bin, err := exec.LookPath("/usr/sbin/nats-server"); err == nil {
		if out, err := exec.Command(bin, "-c", conf, "-t").CombinedOutput(); err != nil {
			t.Errorf("nats-server 2.9 -t: %v: %s", err, out)
		}
	}
}
