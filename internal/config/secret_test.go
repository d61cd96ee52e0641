package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The secrets used in these tests: none may appear in any output.
const (
	natsPassword  = "nats-pw-4711"
	redisPassword = "redis-pw-0815"
	serveToken    = "api-token-9999"
)

// secretTests are cases of secrets from the file, the environment and
// *_file keys. In yaml and env, @DIR@ is replaced by a directory holding
// the files nats.pw, redis.pw, token, empty.
var secretTests = []struct {
	name string
	yaml string
	env  map[string]string
	want [3]string // nats.password, redis.password, serve.token
	errs []wantErr
}{
	{
		name: "from the file",
		yaml: "nats:\n  user: u\n  password: " + natsPassword + "\nredis:\n  password: " + redisPassword + "\n",
		want: [3]string{natsPassword, redisPassword, ""},
	},
	{
		name: "from the environment",
		env:  map[string]string{"SUDOKU_NATS_USER": "u", "SUDOKU_NATS_PASSWORD": natsPassword, "SUDOKU_SERVE_TOKEN": serveToken},
		want: [3]string{natsPassword, "", serveToken},
	},
	{
		name: "from files named in the file, trimmed",
		yaml: "nats:\n  user: u\n  password_file: @DIR@/nats.pw\nredis:\n  password_file: @DIR@/redis.pw\nserve:\n  token_file: @DIR@/token\n",
		want: [3]string{natsPassword, redisPassword, serveToken},
	},
	{
		name: "from files named in the environment",
		env:  map[string]string{"SUDOKU_NATS_USER": "u", "SUDOKU_NATS_PASSWORD_FILE": "@DIR@/nats.pw", "SUDOKU_SERVE_TOKEN_FILE": "@DIR@/token"},
		want: [3]string{natsPassword, "", serveToken},
	},
	{
		name: "file named in the environment beats secret in the file",
		yaml: "nats:\n  user: u\n  password: old\n",
		env:  map[string]string{"SUDOKU_NATS_PASSWORD_FILE": "@DIR@/nats.pw"},
		want: [3]string{natsPassword, "", ""},
	},
	{
		name: "secret in the environment beats file named in the file",
		yaml: "nats:\n  user: u\n  password_file: @DIR@/redis.pw\n",
		env:  map[string]string{"SUDOKU_NATS_PASSWORD": natsPassword},
		want: [3]string{natsPassword, "", ""},
	},
	{
		name: "secret and its file in the same place",
		yaml: "nats:\n  user: u\n  password: " + natsPassword + "\n  password_file: @DIR@/nats.pw\n",
		errs: []wantErr{{key: "nats.password_file"}},
	},
	{
		name: "missing secret file",
		env:  map[string]string{"SUDOKU_REDIS_PASSWORD_FILE": "@DIR@/none"},
		errs: []wantErr{{key: "redis.password_file", value: `"@DIR@/none"`}},
	},
	{
		name: "empty secret file",
		yaml: "serve:\n  token_file: @DIR@/empty\n",
		errs: []wantErr{{key: "serve.token_file"}},
	},
	{
		name: "secret that is not a string",
		yaml: "redis:\n  password:\n    - " + redisPassword + "\n",
		errs: []wantErr{{key: "redis.password", is: errString}},
	},
	{
		name: "secret in a bad setting",
		env:  map[string]string{"SUDOKU_NATS_PASSWORD": natsPassword},
		errs: []wantErr{{key: "nats.password"}}, // without nats.user
	},
}

// secretDir returns a new folder holding the secret files that
// secretTests name as @DIR@/nats.pw, redis.pw, token and empty, and those
// of the samples of *_file keys (sample).
func secretDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for i := 1; i <= 3; i++ {
		writeFile(t, dir, "sample-"+strconv.Itoa(i), sampleSecret(i)+"\n")
	}
	writeFile(t, dir, "nats.pw", natsPassword+"\n")
	writeFile(t, dir, "redis.pw", "  "+redisPassword+"\r\n")
	writeFile(t, dir, "token", serveToken)
	writeFile(t, dir, "empty", "\n")
	return dir
}

func TestSecrets(t *testing.T) {
	dir := secretDir(t)
	subst := func(s string) string { return strings.ReplaceAll(s, "@DIR@", dir) }

	for _, tt := range secretTests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range tt.env {
				env[k] = subst(v)
			}
			c, err := load(t, subst(tt.yaml), env, nil)
			if tt.errs != nil {
				for i := range tt.errs {
					tt.errs[i].value = subst(tt.errs[i].value)
				}
				checkErrs(t, err, tt.errs)
				noSecrets(t, "error", err.Error())
				for _, e := range errorList(err) {
					if secretKey(e.Key) && e.Value != "" {
						t.Errorf("error shows the value of secret %s: %v", e.Key, e)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := [3]string{c.NATS.Password.Reveal(), c.Redis.Password.Reveal(), c.Serve.Token.Reveal()}
			if got != tt.want {
				t.Errorf("got secrets %q, want %q", got, tt.want)
			}
		})
	}
}

// secretKey reports whether key is a secret.
func secretKey(key string) bool {
	f := byKey[key]
	return f != nil && f.secret
}

// secretConfig returns a valid Config with every secret set, and
// credentials in the NATS URL.
func secretConfig() *Config {
	c := Default()
	c.NATS.URL = "nats://alice:" + natsPassword + "@n1:4222,nats://" + serveToken + "@n2:4222"
	c.NATS.User = "alice"
	c.NATS.Password = natsPassword
	c.Redis.Password = redisPassword
	c.Serve.Token = serveToken
	return c
}

func TestLogValue(t *testing.T) {
	c := secretConfig()
	for _, h := range []struct {
		name string
		new  func(*bytes.Buffer) slog.Handler
	}{
		{"json", func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) }},
		{"text", func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) }},
	} {
		t.Run(h.name, func(t *testing.T) {
			var buf bytes.Buffer
			logger := slog.New(h.new(&buf))
			logger.Info("starting", "config", c)
			logger.Info("starting", "config", *c)
			out := buf.String()
			noSecrets(t, "log", out)
			for _, want := range []string{"[redacted]", "n1:4222", "127.0.0.1:6379", "30s"} {
				if !strings.Contains(out, want) {
					t.Errorf("log lacks %q:\n%s", want, out)
				}
			}
		})
	}

	// The JSON line has the file's shape, secrets set are "[redacted]"
	// and unset ones are left out.
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", "config", c)
	var line struct {
		Config map[string]map[string]any `json:"config"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	nats := line.Config["nats"]
	if nats["password"] != "[redacted]" || nats["url"] != "nats://[redacted]@n1:4222,nats://[redacted]@n2:4222" {
		t.Errorf("nats: %v", nats)
	}
	if _, ok := nats["token"]; ok {
		t.Errorf("unset nats.token is logged: %v", nats)
	}
	if line.Config["queue"]["ack_wait"] != "10s" || line.Config["queue"]["batch_size"] != float64(4096) {
		t.Errorf("queue: %v", line.Config["queue"])
	}
}

func TestRedacted(t *testing.T) {
	c := secretConfig()
	m := c.Redacted()
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	noSecrets(t, "Redacted", string(out))
	if got := m["redis"].(map[string]any)["password"]; got != "[redacted]" {
		t.Errorf("redis.password = %v", got)
	}
	// Every key but the unset secrets is there.
	for _, f := range fields {
		parts := strings.Split(f.key, ".")
		sub := m
		for _, p := range parts[:len(parts)-1] {
			sub = sub[p].(map[string]any)
		}
		_, ok := sub[parts[len(parts)-1]]
		if want := !f.secret || !f.get(c).IsZero(); ok != want {
			t.Errorf("%s present: %v, want %v", f.key, ok, want)
		}
	}
}

func TestSecretType(t *testing.T) {
	c := secretConfig()
	c.NATS.URL = Default().NATS.URL // fmt shows a URL as it is
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		noSecrets(t, format, fmt.Sprintf(format, *c))
	}
	out, err := json.Marshal(c.Redis)
	if err != nil {
		t.Fatal(err)
	}
	noSecrets(t, "json", string(out))
	if c.Serve.Token.Reveal() != serveToken {
		t.Error("Reveal does not give the secret")
	}
	if Secret("").String() != "" {
		t.Error("empty secret does not print empty")
	}
}

// noSecrets fails t if out holds any of the test secrets.
func noSecrets(t *testing.T, what, out string) {
	t.Helper()
	for _, s := range []string{natsPassword, redisPassword, serveToken} {
		if strings.Contains(out, s) {
			t.Errorf("%s shows secret %q:\n%s", what, s, out)
		}
	}
}

func TestTLSClientConfig(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM := selfSigned(t)
	ca := writeFile(t, dir, "ca.pem", string(certPEM))
	cert := writeFile(t, dir, "cert.pem", string(certPEM))
	key := writeFile(t, dir, "key.pem", string(keyPEM))
	junk := writeFile(t, dir, "junk.pem", "not a certificate")

	if conf, err := (TLSConfig{}).ClientConfig(); conf != nil || err != nil {
		t.Errorf("off: got %v, %v", conf, err)
	}
	conf, err := TLSConfig{Enabled: true}.ClientConfig()
	if err != nil || conf == nil || conf.RootCAs != nil {
		t.Errorf("enabled: got %v, %v", conf, err)
	}
	conf, err = TLSConfig{CAFile: ca, CertFile: cert, KeyFile: key}.ClientConfig()
	if err != nil || conf.RootCAs == nil || len(conf.Certificates) != 1 {
		t.Errorf("files: got %v, %v", conf, err)
	}
	for _, bad := range []TLSConfig{
		{CAFile: junk},
		{CAFile: filepath.Join(dir, "none.pem")},
		{CertFile: cert, KeyFile: junk},
	} {
		if _, err := bad.ClientConfig(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	if _, err := os.Stat(ca); err != nil {
		t.Fatal(err)
	}
}
