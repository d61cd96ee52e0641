package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// configsDir is the repository's configs/ directory.
const configsDir = "../../configs"

// TestReferenceFile keeps configs/sudoku.yaml, the documented reference,
// in step with Config: it holds every key, each with a comment, and
// loading it gives exactly the defaults.
func TestReferenceFile(t *testing.T) {
	path := filepath.Join(configsDir, "sudoku.yaml")
	c, err := Load(LoadOptions{File: path, Env: mapEnv(nil)})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, c, Default())

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := prefix + k.Value
			if k.HeadComment == "" && k.LineComment == "" {
				t.Errorf("%s:%d: %s has no comment", path, k.Line, key)
			}
			if v.Kind == yaml.MappingNode {
				walk(v, key+".")
				continue
			}
			documented[key] = true
		}
	}
	walk(doc.Content[0], "")
	for _, f := range fields {
		if !documented[f.key] {
			t.Errorf("%s does not document %s", path, f.key)
		}
	}
	for key := range documented {
		if byKey[key] == nil {
			t.Errorf("%s documents %s, which is no key", path, key)
		}
	}
}

// TestDeploymentFiles checks the YAML of each deployment shape.
func TestDeploymentFiles(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, c *Config)
	}{
		{"local.yaml", func(t *testing.T, c *Config) {
			if c.NATS.URL != "nats://127.0.0.1:4222" || !slices.Equal(c.Redis.Addrs, []string{"127.0.0.1:6379"}) {
				t.Errorf("nats.url %q, redis.addrs %q", c.NATS.URL, c.Redis.Addrs)
			}
			if c.Queue.Replicas != 1 || c.Metrics.Addr != "127.0.0.1:9090" {
				t.Errorf("replicas %d, metrics %q", c.Queue.Replicas, c.Metrics.Addr)
			}
		}},
		{"cluster.yaml", func(t *testing.T, c *Config) {
			if c.NATS.URL != "nats://nats1:4222,nats://nats2:4222,nats://nats3:4222" {
				t.Errorf("nats.url = %q", c.NATS.URL)
			}
			if c.Queue.Replicas != 3 {
				t.Errorf("queue.replicas = %d", c.Queue.Replicas)
			}
			if !slices.Equal(c.Redis.Addrs, []string{"redis:6379"}) {
				t.Errorf("redis.addrs = %q", c.Redis.Addrs)
			}
			if c.Metrics.Addr != "0.0.0.0:9090" || c.Log.Format != "json" {
				t.Errorf("metrics.addr %q, log.format %q", c.Metrics.Addr, c.Log.Format)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, err := Load(LoadOptions{File: filepath.Join(configsDir, tt.file), Env: mapEnv(nil)})
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestLogHandler(t *testing.T) {
	var b strings.Builder
	l := LogConfig{Level: "warn", Format: "json"}
	h := l.Handler(&b)
	if h.Enabled(t.Context(), -4) || !h.Enabled(t.Context(), 4) {
		t.Error("level not applied")
	}
	if (LogConfig{Level: "nonsense"}).SlogLevel() != 0 {
		t.Error("bad level is not info")
	}
}

// selfSigned returns a self-signed certificate and its key, in PEM.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sudoku test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
