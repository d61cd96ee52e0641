package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// pki is a test certificate authority with a server certificate for
// 127.0.0.1 and a client certificate, as PEM files.
type pki struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

func newPKI(t testing.TB) pki {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	keyPEM := func(name string, k *ecdsa.PrivateKey) string {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name, "PRIVATE KEY", der)
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sudoku test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, k *ecdsa.PrivateKey) []byte {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	sKey, cKey := newKey(), newKey()
	return pki{
		CA:         write("ca.pem", "CERTIFICATE", caDER),
		ServerCert: write("server.pem", "CERTIFICATE", leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, sKey)),
		ServerKey:  keyPEM("server-key.pem", sKey),
		ClientCert: write("client.pem", "CERTIFICATE", leaf(3, "sudoku worker", x509.ExtKeyUsageClientAuth, cKey)),
		ClientKey:  keyPEM("client-key.pem", cKey),
	}
}

// startServer starts argv, waits (10s at most) until addr accepts TCP
// connections, and kills the process when the test ends. It is for a
// redis-server without persistence, which serves once it listens; a
// nats-server needs testenv.NATSServer, which waits for JetStream.
func startServer(t testing.TB, addr string, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", strings.Join(argv, " "), err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(argv[0]), tail(logs.String(), 3000))
		}
	})
	waitUntil(t, 10*time.Second, filepath.Base(argv[0])+" listening on "+addr, func() bool {
		select {
		case <-exited:
			t.Fatalf("%s exited:\n%s", strings.Join(argv, " "), logs.String())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// TestTLS runs a worker and a producer against a NATS server and a Redis
// that both require TLS with a client certificate (mutual TLS), given
// through nats.tls.* and redis.tls.*; without the client certificate, or
// without the CA, the worker fails at start-up naming what failed.
func TestTLS(t *testing.T) {
	redisBin := lookBin(t, "SUDOKU_TEST_REDIS_SERVER", "redis-server")
	p := newPKI(t)
	// NATSServer returns once JetStream is ready (its monitoring endpoint
	// is plain HTTP, apart from the TLS client port).
	natsAddr := testenv.NATSServer(t,
		"--tls", "--tlscert", p.ServerCert, "--tlskey", p.ServerKey, "--tlscacert", p.CA, "--tlsverify").Addr
	redisAddr := freeAddr(t)
	_, redisPort, _ := net.SplitHostPort(redisAddr)
	startServer(t, redisAddr, redisBin, "--port", "0", "--tls-port", redisPort, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(),
		"--tls-cert-file", p.ServerCert, "--tls-key-file", p.ServerKey, "--tls-ca-cert-file", p.CA,
		"--tls-auth-clients", "yes")

	tlsEnv := env{
		"SUDOKU_NATS_URL=nats://" + natsAddr,
		"SUDOKU_NATS_TLS_CA_FILE=" + p.CA,
		"SUDOKU_NATS_TLS_CERT_FILE=" + p.ClientCert,
		"SUDOKU_NATS_TLS_KEY_FILE=" + p.ClientKey,
		"SUDOKU_REDIS_ADDRS=" + redisAddr,
		"SUDOKU_REDIS_TLS_CA_FILE=" + p.CA,
		"SUDOKU_REDIS_TLS_CERT_FILE=" + p.ClientCert,
		"SUDOKU_REDIS_TLS_KEY_FILE=" + p.ClientKey,
	}
	t.Run("mutual_tls_works", func(t *testing.T) {
		e := baseEnv(queueEnv(testenv.Name("e2etls"))...).with(tlsEnv...)
		start(t, "worker", e, "worker")
		file := writeFile(t, manyPuzzles(t, 200, "17_clue_200.txt"))
		code, out, stderr := run(t, time.Minute, e, "submit", "--wait", file)
		if code != 0 {
			t.Fatalf("submit --wait: exit %d: %s", code, stderr)
		}
		if out != localOut(t, file) {
			t.Error("results over TLS differ from solve --local")
		}
	})

	// NATS holds the jobs: a worker that cannot reach it fails at
	// start-up, naming what failed.
	bad := []struct {
		name string
		env  env
		want []string
	}{
		{"nats_without_client_certificate", env{"SUDOKU_NATS_TLS_CERT_FILE=", "SUDOKU_NATS_TLS_KEY_FILE="},
			[]string{"connect to NATS at nats://" + natsAddr}},
		{"nats_without_the_ca", env{"SUDOKU_NATS_TLS_CA_FILE="},
			[]string{"connect to NATS at nats://" + natsAddr, "x509"}},
		{"missing_ca_file", env{"SUDOKU_NATS_TLS_CA_FILE=" + filepath.Join(t.TempDir(), "absent.pem")},
			[]string{"nats.tls", "absent.pem"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			// An empty value counts as unset, so these take the setting away.
			e := baseEnv(queueEnv(testenv.Name("e2etls"))...).with(tlsEnv...).with(tc.env...).with(
				"SUDOKU_NATS_CONNECT_TIMEOUT=2s", "SUDOKU_REDIS_DIAL_TIMEOUT=1s")
			code, _, stderr := run(t, 40*time.Second, e, "worker")
			if code == 0 {
				t.Fatalf("exit 0; want a failure at start-up")
			}
			for _, s := range tc.want {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			t.Logf("exit %d: %s", code, strings.TrimSpace(lastLine(stderr)))
		})
	}

	// Redis is only a cache: a worker that cannot reach it says so,
	// naming the address and what failed, and works without it; so does
	// the producer, and the job completes.
	badRedis := []struct {
		name string
		env  env
		want []string
	}{
		{"redis_without_client_certificate", env{"SUDOKU_REDIS_TLS_CERT_FILE=", "SUDOKU_REDIS_TLS_KEY_FILE="}, nil},
		{"redis_without_the_ca", env{"SUDOKU_REDIS_TLS_CA_FILE="}, []string{"x509"}},
		{"redis_without_tls", env{"SUDOKU_REDIS_TLS_CA_FILE=", "SUDOKU_REDIS_TLS_CERT_FILE=", "SUDOKU_REDIS_TLS_KEY_FILE="}, nil},
	}
	file := writeFile(t, manyPuzzles(t, 100, "17_clue_200.txt"))
	want := localOut(t, file)
	for _, tc := range badRedis {
		t.Run(tc.name, func(t *testing.T) {
			e := baseEnv(queueEnv(testenv.Name("e2etls"))...).with(tlsEnv...).with(tc.env...).with(
				"SUDOKU_REDIS_DIAL_TIMEOUT=1s")
			w := start(t, "worker", e, "worker")
			code, out, stderr := run(t, time.Minute, e, "submit", "--wait", file)
			if code != 0 || out != want {
				t.Fatalf("submit --wait without Redis: exit %d, results as solve --local's: %v; stderr:\n%s", code, out == want, stderr)
			}
			if w.exited() {
				t.Fatalf("the worker exited (%d)", w.code)
			}
			for what, log := range map[string]string{"the worker": w.stderr.String(), "the producer": stderr} {
				for _, s := range append([]string{"Redis not reachable; going on without the cache", redisAddr}, tc.want...) {
					if !strings.Contains(log, s) {
						t.Errorf("%s's log lacks %q:\n%s", what, s, log)
					}
				}
			}
			t.Logf("%s", strings.TrimSpace(lastLine(w.stderr.String())))
		})
	}
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
