package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
)

// secret returns a random secret, recognisable in output if it leaks.
func secret(kind string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return kind + "-" + hex.EncodeToString(b[:])
}

// secretFile writes s to a new file readable by its owner only.
func secretFile(t testing.TB, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// noSecrets fails the test for each secret that appears in out.
func noSecrets(t testing.TB, what, out string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("%s shows the secret %q:\n%s", what, s, out)
		}
	}
}

// TestAuthentication runs workers and producers against a NATS server
// that requires a user and password, one that requires a token, and a
// Redis that requires a password (the default user) or an ACL user's. The
// right credentials, from the environment or from files, work; wrong or
// missing ones make `sudoku worker` fail at start-up with a message that
// names what refused them. No secret ever shows in any output.
func TestAuthentication(t *testing.T) {
	var (
		natsPass   = secret("natspass")
		natsToken  = secret("natstoken")
		redisPass  = secret("redispass")
		aclPass    = secret("aclpass")
		wrongNATS  = secret("wrongnats")
		wrongRedis = secret("wrongredis")
	)
	secrets := []string{natsPass, natsToken, redisPass, aclPass, wrongNATS, wrongRedis}
	userNATS := testenv.NATSServer(t, "--user", "sudoku", "--pass", natsPass)
	tokenNATS := testenv.NATSServer(t, "--auth", natsToken)
	// The default user has redisPass; the ACL user "worker" has aclPass.
	rds := testenv.RedisServer(t, "--requirepass", redisPass,
		"--user", "worker", "on", ">"+aclPass, "~*", "&*", "+@all")

	puzzles := writeFile(t, manyPuzzles(t, 200, "17_clue_200.txt"))
	want := localOut(t, puzzles)

	good := []struct {
		name string
		env  env
	}{
		{"user_and_password_from_the_environment", env{
			"SUDOKU_NATS_URL=" + userNATS.URL(),
			"SUDOKU_NATS_USER=sudoku",
			"SUDOKU_NATS_PASSWORD=" + natsPass,
			"SUDOKU_REDIS_PASSWORD=" + redisPass,
		}},
		{"token_and_acl_user_from_files", env{
			"SUDOKU_NATS_URL=" + tokenNATS.URL(),
			"SUDOKU_NATS_TOKEN_FILE=" + secretFile(t, natsToken),
			"SUDOKU_REDIS_USERNAME=worker",
			"SUDOKU_REDIS_PASSWORD_FILE=" + secretFile(t, aclPass),
		}},
		{"password_file_and_credentials_in_the_url", env{
			"SUDOKU_NATS_URL=nats://sudoku:" + natsPass + "@" + userNATS.Addr,
			"SUDOKU_REDIS_PASSWORD_FILE=" + secretFile(t, redisPass),
		}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			name := testenv.Name("e2eauth")
			e := baseEnv(queueEnv(name)...).with("SUDOKU_REDIS_ADDRS=" + rds.Addr).with(tc.env...)
			w := start(t, "worker", e.with("SUDOKU_LOG_LEVEL=info"), "worker")
			code, out, stderr := run(t, time.Minute, e, "submit", "--wait", puzzles)
			if code != 0 {
				t.Fatalf("submit --wait: exit %d: %s", code, stderr)
			}
			if out != want {
				t.Error("results differ from solve --local")
			}
			noSecrets(t, "submit's output", out+stderr, secrets)
			if code := w.stop(20 * time.Second); code != 0 {
				t.Errorf("worker: exit %d after SIGTERM", code)
			}
			log := w.stderr.String()
			noSecrets(t, "the worker's log", log, secrets)
			// The start-up lines: the start, then the configuration one
			// section a line.
			startLines := ""
			for line := range strings.Lines(log) {
				if strings.Contains(line, "sudoku worker starting") || strings.Contains(line, "msg=configuration") {
					startLines += line
				}
			}
			if !strings.Contains(startLines, "sudoku worker starting") {
				t.Fatalf("no start-up line in the worker's log:\n%s", log)
			}
			if !strings.Contains(startLines, "[redacted]") {
				t.Errorf("the start-up lines redact nothing:\n%s", startLines)
			}
		})
	}

	bad := []struct {
		name     string
		env      env
		wantCode int
		want     []string // in stderr
	}{
		{"wrong_nats_password", env{
			"SUDOKU_NATS_URL=" + userNATS.URL(),
			"SUDOKU_NATS_USER=sudoku",
			"SUDOKU_NATS_PASSWORD=" + wrongNATS,
			"SUDOKU_REDIS_PASSWORD=" + redisPass,
		}, 1, []string{"NATS at " + userNATS.URL() + " refused the credentials", "nats.password", "Authorization Violation"}},
		{"no_nats_credentials", env{
			"SUDOKU_NATS_URL=" + userNATS.URL(),
			"SUDOKU_REDIS_PASSWORD=" + redisPass,
		}, 1, []string{"NATS at " + userNATS.URL() + " refused the credentials", "Authorization Violation"}},
		{"wrong_nats_token_in_a_file", env{
			"SUDOKU_NATS_URL=" + tokenNATS.URL(),
			"SUDOKU_NATS_TOKEN_FILE=" + secretFile(t, wrongNATS),
			"SUDOKU_REDIS_PASSWORD=" + redisPass,
		}, 1, []string{"NATS at " + tokenNATS.URL() + " refused the credentials", "nats.token"}},
		{"wrong_credentials_in_the_url", env{
			"SUDOKU_NATS_URL=nats://sudoku:" + wrongNATS + "@" + userNATS.Addr,
			"SUDOKU_REDIS_PASSWORD=" + redisPass,
		}, 1, []string{"NATS at nats://[redacted]@" + userNATS.Addr + " refused the credentials"}},
		{"wrong_redis_password", env{
			"SUDOKU_NATS_URL=" + userNATS.URL(),
			"SUDOKU_NATS_USER=sudoku",
			"SUDOKU_NATS_PASSWORD=" + natsPass,
			"SUDOKU_REDIS_PASSWORD=" + wrongRedis,
		}, 1, []string{"Redis at " + rds.Addr + " refused the credentials", "redis.password", "WRONGPASS"}},
		{"no_redis_password", env{
			"SUDOKU_NATS_URL=" + userNATS.URL(),
			"SUDOKU_NATS_USER=sudoku",
			"SUDOKU_NATS_PASSWORD=" + natsPass,
		}, 1, []string{"Redis at " + rds.Addr + " refused the credentials", "NOAUTH"}},
		{"wrong_acl_user_password_in_a_file", env{
			"SUDOKU_NATS_URL=" + tokenNATS.URL(),
			"SUDOKU_NATS_TOKEN=" + natsToken,
			"SUDOKU_REDIS_USERNAME=worker",
			"SUDOKU_REDIS_PASSWORD_FILE=" + secretFile(t, wrongRedis),
		}, 1, []string{"Redis at " + rds.Addr + " refused the credentials", "redis.username", "WRONGPASS"}},
		{"missing_password_file", env{
			"SUDOKU_NATS_URL=" + userNATS.URL(),
			"SUDOKU_NATS_USER=sudoku",
			"SUDOKU_NATS_PASSWORD_FILE=" + filepath.Join(t.TempDir(), "absent"),
		}, 2, []string{"nats.password_file"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			name := testenv.Name("e2eauth")
			e := baseEnv(queueEnv(name)...).with("SUDOKU_REDIS_ADDRS=" + rds.Addr).with(tc.env...)
			code, out, stderr := run(t, 30*time.Second, e.with("SUDOKU_LOG_LEVEL=info"), "worker")
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, stderr)
			}
			for _, s := range tc.want {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			noSecrets(t, "the worker's output", out+stderr, secrets)
		})
	}
}
