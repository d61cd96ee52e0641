package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// wantErr is one *Error a test expects.
type wantErr struct {
	key   string
	value string // "" does not check the value
	is    error  // nil does not check errors.Is
}

// loadTest is one case of Load: a file, an environment and flags, and
// either a check of the result or the errors expected.
type loadTest struct {
	name  string
	yaml  string            // the file's content; "" means no file
	env   map[string]string // the environment
	args  []string          // command line flags (parsed's set)
	check func(t *testing.T, c *Config)
	errs  []wantErr
}

var loadTests = []loadTest{
	{
		name:  "no file gives the defaults",
		check: func(t *testing.T, c *Config) { equal(t, c, Default()) },
	},
	{
		name:  "empty file gives the defaults",
		yaml:  "# nothing but a comment\n",
		check: func(t *testing.T, c *Config) { equal(t, c, Default()) },
	},
	{
		name:  "sections with every key commented out give the defaults",
		yaml:  "nats:\n  # url: nats://x:4222\nredis:\n",
		check: func(t *testing.T, c *Config) { equal(t, c, Default()) },
	},
	{
		name:  "keys without a value give the defaults",
		yaml:  "nats:\n  url:\nqueue:\n  backoff:\n",
		check: func(t *testing.T, c *Config) { equal(t, c, Default()) },
	},
	{
		name: "file overrides the defaults",
		yaml: `
nats:
  url: nats://a:4222,nats://b:4222
  tls:
    ca_file: /etc/ca.pem
redis:
  addrs: [r1:6379, r2:6379]
  db: 0
queue:
  batch_size: 10
  ack_wait: 5s
  backoff: [2s, 10s]
  storage: memory
worker:
  max_nodes: -1
cache:
  memory_fallback: false
`,
		check: func(t *testing.T, c *Config) {
			want := Default()
			want.NATS.URL = "nats://a:4222,nats://b:4222"
			want.NATS.TLS.CAFile = "/etc/ca.pem"
			want.Redis.Addrs = []string{"r1:6379", "r2:6379"}
			want.Queue.BatchSize = 10
			want.Queue.AckWait = 5 * time.Second
			want.Queue.Backoff = []time.Duration{2 * time.Second, 10 * time.Second}
			want.Queue.Storage = "memory"
			want.Worker.MaxNodes = -1
			want.Cache.MemoryFallback = false
			equal(t, c, want)
		},
	},
	{
		name: "keys are case-insensitive and may be dotted",
		yaml: "NATS:\n  URL: nats://upper:4222\nqueue.batch_size: 7\n",
		check: func(t *testing.T, c *Config) {
			if c.NATS.URL != "nats://upper:4222" || c.Queue.BatchSize != 7 {
				t.Errorf("got url %q, batch size %d", c.NATS.URL, c.Queue.BatchSize)
			}
		},
	},
	{
		name: "environment overrides the defaults",
		env: map[string]string{
			"SUDOKU_NATS_URL":             "nats://env:4222",
			"SUDOKU_REDIS_ADDRS":          "a:1, b:2",
			"SUDOKU_QUEUE_ACK_WAIT":       "5s",
			"SUDOKU_QUEUE_BACKOFF":        "1s,2s",
			"SUDOKU_NATS_TLS_ENABLED":     "true",
			"SUDOKU_WORKER_CONCURRENCY":   "3",
			"SUDOKU_SERVE_MAX_BODY_BYTES": "1000",
		},
		check: func(t *testing.T, c *Config) {
			want := Default()
			want.NATS.URL = "nats://env:4222"
			want.Redis.Addrs = []string{"a:1", "b:2"}
			want.Queue.AckWait = 5 * time.Second
			want.Queue.Backoff = []time.Duration{time.Second, 2 * time.Second}
			want.NATS.TLS.Enabled = true
			want.Worker.Concurrency = 3
			want.Serve.MaxBodyBytes = 1000
			equal(t, c, want)
		},
	},
	{
		name: "empty environment variable counts as unset",
		yaml: "metrics:\n  addr: 127.0.0.1:9999\n",
		env:  map[string]string{"SUDOKU_METRICS_ADDR": ""},
		check: func(t *testing.T, c *Config) {
			if c.Metrics.Addr != "127.0.0.1:9999" {
				t.Errorf("metrics.addr = %q, want the file's", c.Metrics.Addr)
			}
		},
	},
	{
		name: "environment overrides the file",
		yaml: "nats:\n  url: nats://file:4222\n  name: fromfile\n",
		env:  map[string]string{"SUDOKU_NATS_URL": "nats://env:4222"},
		check: func(t *testing.T, c *Config) {
			if c.NATS.URL != "nats://env:4222" || c.NATS.Name != "fromfile" {
				t.Errorf("got url %q, name %q", c.NATS.URL, c.NATS.Name)
			}
		},
	},
	{
		name: "flag overrides environment overrides file",
		yaml: "nats:\n  url: nats://file:4222\nqueue:\n  batch_size: 1\nlog:\n  level: warn\n",
		env:  map[string]string{"SUDOKU_NATS_URL": "nats://env:4222", "SUDOKU_QUEUE_BATCH_SIZE": "2"},
		args: []string{"--nats-url", "nats://flag:4222", "--redis-addrs", "x:1,y:2"},
		check: func(t *testing.T, c *Config) {
			if c.NATS.URL != "nats://flag:4222" {
				t.Errorf("nats.url = %q, want the flag's", c.NATS.URL)
			}
			if c.Queue.BatchSize != 2 {
				t.Errorf("queue.batch_size = %d, want the environment's 2", c.Queue.BatchSize)
			}
			if c.Log.Level != "warn" {
				t.Errorf("log.level = %q, want the file's", c.Log.Level)
			}
			if !reflect.DeepEqual(c.Redis.Addrs, []string{"x:1", "y:2"}) {
				t.Errorf("redis.addrs = %q", c.Redis.Addrs)
			}
		},
	},
	{
		name: "flags left at their defaults do not override",
		env:  map[string]string{"SUDOKU_LOG_FORMAT": "json"},
		args: []string{},
		check: func(t *testing.T, c *Config) {
			if c.Log.Format != "json" {
				t.Errorf("log.format = %q, want the environment's", c.Log.Format)
			}
		},
	},
	{
		name: "unknown key",
		yaml: "nats:\n  urll: nats://x:4222\n",
		errs: []wantErr{{key: "nats.urll", is: ErrUnknownKey}},
	},
	{
		name: "empty and spaced keys",
		yaml: "\"\": 1\nnats:\n  \"u rl\": x\n",
		errs: []wantErr{{key: `""`, is: ErrUnknownKey}, {key: `nats."u rl"`, is: ErrUnknownKey}},
	},
	{
		name: "unknown nested key and unknown section",
		yaml: "nats:\n  tls:\n    ca: x\nnat:\n  url: y\n",
		errs: []wantErr{{key: "nat", is: ErrUnknownKey}, {key: "nats.tls.ca", is: ErrUnknownKey}},
	},
	{
		name: "removed key in the file",
		yaml: "worker:\n  fetch: 8\n  concurrency: 2\n",
		errs: []wantErr{{key: "worker.fetch", is: ErrUnknownKey}},
	},
	{
		name: "removed key in the environment",
		env:  map[string]string{"SUDOKU_WORKER_FETCH": "8"},
		errs: []wantErr{{key: "worker.fetch", is: ErrUnknownKey}},
	},
	{
		name: "section that is not a mapping",
		yaml: "nats: nats://x:4222\n",
		errs: []wantErr{{key: "nats", value: `"nats://x:4222"`}},
	},
	{
		name: "value that is a mapping",
		yaml: "nats:\n  url:\n    host: x\n",
		errs: []wantErr{{key: "nats.url"}},
	},
	{
		name: "bad duration in the file",
		yaml: "queue:\n  ack_wait: abc\n",
		errs: []wantErr{{key: "queue.ack_wait", value: `"abc"`, is: errDuration}},
	},
	{
		name: "duration without a unit",
		yaml: "queue:\n  ack_wait: 30\n",
		errs: []wantErr{{key: "queue.ack_wait", value: "30", is: errUnit}},
	},
	{
		name: "bad duration in the environment",
		env:  map[string]string{"SUDOKU_QUEUE_ACK_WAIT": "soon"},
		errs: []wantErr{{key: "queue.ack_wait", value: `"soon"`, is: errDuration}},
	},
	{
		name: "bad duration in a list",
		yaml: "queue:\n  backoff: [1s, x]\n",
		errs: []wantErr{{key: "queue.backoff", value: `["1s", "x"]`, is: errDuration}},
	},
	{
		name: "several bad values at once",
		yaml: "queue:\n  ack_wait: 30\n  batch_size: 1.5\nredis:\n  password: [x]\n",
		errs: []wantErr{
			{key: "queue.ack_wait", value: "30", is: errUnit},
			{key: "queue.batch_size", value: "1.5", is: errInt},
			{key: "redis.password", is: errString},
		},
	},
	{
		name: "a variable named after a section",
		env:  map[string]string{"SUDOKU_NATS": "nats://x:4222"},
		errs: []wantErr{{key: "nats"}},
	},
	{
		name: "bad integer",
		env:  map[string]string{"SUDOKU_QUEUE_BATCH_SIZE": "abc"},
		errs: []wantErr{{key: "queue.batch_size", value: `"abc"`, is: errInt}},
	},
	{
		name: "fraction for an integer",
		yaml: "queue:\n  batch_size: 1.5\n",
		errs: []wantErr{{key: "queue.batch_size", value: "1.5", is: errInt}},
	},
	{
		name: "bad boolean",
		yaml: "cache:\n  memory_fallback: maybe\n",
		errs: []wantErr{{key: "cache.memory_fallback", value: `"maybe"`, is: errBool}},
	},
	{
		name: "number for a string",
		yaml: "nats:\n  name: 0123\n",
		errs: []wantErr{{key: "nats.name", is: errString}},
	},
	{
		name: "bad flag value",
		args: []string{"--nats-url", "http://x:1"},
		errs: []wantErr{{key: "nats.url", value: `"http://x:1"`}},
	},
	{
		name: "nice out of range",
		env:  map[string]string{"SUDOKU_WORKER_NICE": "20"},
		errs: []wantErr{{key: "worker.nice", value: "20"}},
	},
	{
		name: "every problem at once",
		yaml: "nats:\n  urll: x\nqueue:\n  ack_wait: abc\n  replicas: 9\n",
		env:  map[string]string{"SUDOKU_WORKER_CONCURRENCY": "-1"},
		errs: []wantErr{
			{key: "nats.urll", is: ErrUnknownKey},
			{key: "queue.ack_wait", value: `"abc"`},
			{key: "queue.replicas", value: "9"},
			{key: "worker.concurrency", value: "-1"},
		},
	},
}

func TestLoad(t *testing.T) {
	for _, tt := range loadTests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, tt.yaml, tt.env, tt.args)
			if tt.errs == nil {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				tt.check(t, c)
				return
			}
			checkErrs(t, err, tt.errs)
		})
	}
}

func TestLoadConfigFileLocation(t *testing.T) {
	dir := t.TempDir()
	byFlag := writeFile(t, dir, "flag.yaml", "nats:\n  name: by-flag\n")
	byEnv := writeFile(t, dir, "env.yaml", "nats:\n  name: by-env\n")
	explicit := writeFile(t, dir, "explicit.yml", "nats:\n  name: explicit\n")
	env := mapEnv(map[string]string{EnvConfig: byEnv})

	tests := []struct {
		name string
		opts LoadOptions
		want string
	}{
		{"SUDOKU_CONFIG names the file", LoadOptions{Env: env}, "by-env"},
		{"--config beats SUDOKU_CONFIG", LoadOptions{Env: env, Flags: parsed(t, "--config", byFlag)}, "by-flag"},
		{"File beats --config", LoadOptions{File: explicit, Env: env, Flags: parsed(t, "--config", byFlag)}, "explicit"},
		{"no file at all", LoadOptions{Env: mapEnv(nil), Flags: parsed(t)}, "sudoku"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if c.NATS.Name != tt.want {
				t.Errorf("nats.name = %q, want %q", c.NATS.Name, tt.want)
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	dir := t.TempDir()
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(dir, "none.yaml")
		_, err := Load(LoadOptions{File: path, Env: mapEnv(nil)})
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("got %v, want fs.ErrNotExist", err)
		}
		// For people: the file named once, no Go call ("open").
		if want := "config file " + path + ": no such file or directory"; err == nil || err.Error() != want {
			t.Errorf("got %v, want %q", err, want)
		}
	})
	t.Run("not a mapping, content not quoted", func(t *testing.T) {
		path := writeFile(t, dir, "password.txt", "hunter2\n")
		_, err := Load(LoadOptions{File: path, Env: mapEnv(nil)})
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("got %v, want an error without the content", err)
		}
	})
	t.Run("syntax error", func(t *testing.T) {
		path := writeFile(t, dir, "bad.yaml", "nats: [\n")
		if _, err := Load(LoadOptions{File: path, Env: mapEnv(nil)}); err == nil {
			t.Error("got no error")
		}
	})
}

// TestRemovedKey: a file or a variable still setting worker.fetch gets an
// error saying that the key was removed and what to do, naming where.
func TestRemovedKey(t *testing.T) {
	file := "worker:\n  fetch: 8\n"
	env := map[string]string{"SUDOKU_WORKER_FETCH": "8"}
	for _, tt := range []struct {
		name, yaml string
		env        map[string]string
		source     string // "" for the file's path
	}{
		{"file", file, nil, ""},
		{"environment", "", env, "$SUDOKU_WORKER_FETCH"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.yaml, tt.env, nil)
			checkErrs(t, err, []wantErr{{key: "worker.fetch", is: ErrUnknownKey}})
			e := errorList(err)[0]
			if tt.source != "" && e.Source != tt.source || tt.source == "" && !strings.HasSuffix(e.Source, "sudoku.yaml") {
				t.Errorf("source %q: %v", e.Source, e)
			}
			for _, want := range []string{"removed", "one batch at a time", "docs/jobs.md", "delete"} {
				if !strings.Contains(e.Error(), want) {
					t.Errorf("%q does not say %q", e.Error(), want)
				}
			}
		})
	}
}

func TestLoadErrorSource(t *testing.T) {
	c := map[string]string{"SUDOKU_WORKER_CONCURRENCY": "-1"}
	_, err := load(t, "", c, nil)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want an *Error", err)
	}
	if e.Source != "$SUDOKU_WORKER_CONCURRENCY" {
		t.Errorf("Source = %q", e.Source)
	}
	want := "config: worker.concurrency = -1 (from $SUDOKU_WORKER_CONCURRENCY): must be >= 0"
	if e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
}

func TestSecretFlagRefused(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.String("redis-password", "", "")
	_, err := Load(LoadOptions{Flags: fs, Env: mapEnv(nil)})
	checkErrs(t, err, []wantErr{{key: "redis.password"}})
}

func TestAddKeyFlags(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	AddGlobalFlags(fs)
	if fs.Lookup(FlagConfig) == nil || fs.Lookup("log-level") == nil || fs.Lookup("log-format") == nil {
		t.Fatal("AddGlobalFlags: no --config, --log-level or --log-format")
	}
	if fs.Lookup("nats-url") != nil {
		t.Error("AddGlobalFlags defines --nats-url: a command that does not use NATS would list it")
	}
	// A flag of every type of key: string, list, int, int64, bool,
	// duration, list of durations.
	keys := []string{"nats.url", "redis.addrs", "queue.batch_size", "worker.concurrency", "metrics.addr",
		"worker.max_nodes", "nats.embedded", "job.wait_timeout", "queue.backoff"}
	AddKeyFlags(fs, keys...)
	d := Default()
	// Each flag's default is the key's; each has help naming its variable.
	for _, key := range append(keys, "log.level", "log.format") {
		fl := fs.Lookup(flagName(key))
		if fl == nil {
			t.Errorf("no flag for %s", key)
			continue
		}
		want := formatFlagDefault(byKey[key].get(d).Interface())
		if fl.DefValue != want {
			t.Errorf("--%s default %q, want %q", fl.Name, fl.DefValue, want)
		}
		if !strings.Contains(fl.Usage, "$"+envName(key)) {
			t.Errorf("--%s help %q does not name $%s", fl.Name, fl.Usage, envName(key))
		}
	}
	err := fs.Parse([]string{"--worker-concurrency=4", "--queue-batch-size", "100", "--log-format=json", "--metrics-addr=:9090",
		"--log-level=debug", "--worker-max-nodes", "-1", "--nats-embedded", "--job-wait-timeout", "90s",
		"--queue-backoff", "2s,1m", "--redis-addrs", "a:1,b:2"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{Flags: fs, Env: mapEnv(map[string]string{"SUDOKU_JOB_WAIT_TIMEOUT": "1h"})})
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Worker.Concurrency, want.Queue.BatchSize, want.Log.Format, want.Metrics.Addr = 4, 100, "json", ":9090"
	want.Log.Level, want.Worker.MaxNodes, want.NATS.Embedded, want.Job.WaitTimeout = "debug", -1, true, 90*time.Second
	want.Queue.Backoff, want.Redis.Addrs = []time.Duration{2 * time.Second, time.Minute}, []string{"a:1", "b:2"}
	equal(t, c, want)

	// Flags not given leave the environment's value.
	fs = pflag.NewFlagSet("test", pflag.ContinueOnError)
	AddKeyFlags(fs, "job.wait_timeout")
	if c, err = Load(LoadOptions{Flags: fs, Env: mapEnv(map[string]string{"SUDOKU_JOB_WAIT_TIMEOUT": "1h"})}); err != nil {
		t.Fatal(err)
	}
	if c.Job.WaitTimeout != time.Hour {
		t.Errorf("job.wait_timeout = %v without its flag, want the environment's 1h", c.Job.WaitTimeout)
	}
}

func TestAddKeyFlagsRefuses(t *testing.T) {
	for _, key := range []string{"nats.password", "serve.token", "nats.nope", "nats"} {
		t.Run(key, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("AddKeyFlags(%q) did not panic", key)
				}
			}()
			AddKeyFlags(pflag.NewFlagSet("test", pflag.ContinueOnError), key)
		})
	}
}

// formatFlagDefault formats a default as pflag shows it.
func formatFlagDefault(v any) string {
	switch s := v.(type) {
	case []string:
		return "[" + strings.Join(s, ",") + "]"
	case []time.Duration:
		items := make([]string, len(s))
		for i, d := range s {
			items[i] = d.String()
		}
		return "[" + strings.Join(items, ",") + "]"
	}
	return strings.Trim(formatValue(v), `"`)
}

func TestNamesUnique(t *testing.T) {
	envs, flags := map[string]string{}, map[string]string{}
	for _, f := range fields {
		if other, dup := envs[envName(f.key)]; dup {
			t.Errorf("%s and %s share $%s", f.key, other, envName(f.key))
		}
		envs[envName(f.key)] = f.key
		if other, dup := flags[flagName(f.key)]; dup {
			t.Errorf("%s and %s share --%s", f.key, other, flagName(f.key))
		}
		flags[flagName(f.key)] = f.key
	}
	if _, dup := envs[EnvConfig]; dup {
		t.Errorf("a key has the variable %s", EnvConfig)
	}
	if _, dup := flags[FlagConfig]; dup {
		t.Errorf("a key has the flag --%s", FlagConfig)
	}
}

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestWorkerDerived(t *testing.T) {
	c := Default()
	if c.WorkerConcurrency() < 1 || c.WorkerHeartbeat() != c.Queue.AckWait/3 {
		t.Errorf("defaults: concurrency %d, heartbeat %s", c.WorkerConcurrency(), c.WorkerHeartbeat())
	}
	c.Worker = WorkerConfig{Concurrency: 3, Heartbeat: time.Second}
	if c.WorkerConcurrency() != 3 || c.WorkerHeartbeat() != time.Second {
		t.Errorf("set: concurrency %d, heartbeat %s", c.WorkerConcurrency(), c.WorkerHeartbeat())
	}
}

// FuzzLoadYAML loads any file and checks what Load promises, not only
// that it does not panic:
//
//   - it returns a configuration or an error, never both or neither;
//   - a file that is not YAML, or whose YAML is not a mapping of
//     strings, gets one error naming the file and no *Error;
//   - any other file gets only *Errors (joined), each naming a setting or
//     a section, or wrapping ErrUnknownKey for a key that is neither,
//     never showing a secret's value, and coming from the file or from a
//     default;
//   - a configuration it returns round-trips: written back out as YAML
//     from Redacted (with what Redacted hides put back), it loads again to
//     an equal Config.
//
// The seeds are the files of TestLoad's and TestSecrets' tables, a file
// per key setting it to its sample (TestEveryKey's), and the reference
// file; @DIR@ stands for a folder holding TestSecrets' secret files and
// the samples', as in TestSecrets.
func FuzzLoadYAML(f *testing.F) {
	for _, tt := range loadTests {
		f.Add(tt.yaml)
	}
	for _, text := range sampleFiles(f) {
		f.Add(text)
	}
	for _, tt := range secretTests {
		f.Add(tt.yaml)
	}
	if ref, err := os.ReadFile(filepath.Join(configsDir, "sudoku.yaml")); err == nil {
		f.Add(string(ref))
	} else {
		f.Error(err)
	}
	f.Add("queue:\n  backoff: [null]\n")
	f.Add("{1: 2, nats: {3: 4}}")
	f.Add("redis:\n  addrs: a:1,b:2\n")
	f.Add("nats:\n  url: nats://alice:pw@n1:4222\n  user: alice\n  password: pw\n")
	f.Add("queue:\n  max_deliver: 2\n")
	f.Add("queue:\n  backoff: []\n  ack_wait: 1h2m3.5s\nworker:\n  max_nodes: -9223372036854775808\n")
	secrets := secretDir(f)
	f.Fuzz(func(t *testing.T, text string) {
		text = strings.ReplaceAll(text, "@DIR@", secrets)
		dir := t.TempDir()
		path := writeFile(t, dir, "sudoku.yaml", text)
		c, err := Load(LoadOptions{File: path, Env: mapEnv(nil)})
		if (c == nil) == (err == nil) {
			t.Fatalf("Load returned %v and %v", c, err)
		}
		if err != nil {
			checkLoadErr(t, err, text, path)
			return
		}
		checkRoundTrip(t, c, dir)
	})
}

// checkLoadErr checks Load's error for the file at path holding text.
func checkLoadErr(t *testing.T, err error, text, path string) {
	t.Helper()
	if yaml.Unmarshal([]byte(text), &map[string]any{}) != nil {
		// The file as a whole is wrong (not YAML, or not a mapping with
		// string keys): no setting to name.
		if list := errorList(err); len(list) != 0 || !strings.Contains(err.Error(), path) {
			t.Errorf("for a file that is no YAML mapping, got %d *Errors, want 1 error naming the file: %v", len(list), err)
		}
		return
	}
	for _, leaf := range leafErrors(err) {
		e, ok := leaf.(*Error)
		if !ok {
			t.Errorf("error %q (%T) is not an *Error", leaf, leaf)
			continue
		}
		known := byKey[e.Key] != nil || sections[e.Key]
		switch {
		case e.Key == "":
			t.Errorf("error names no key: %v", e)
		case errors.Is(e, ErrUnknownKey) && known:
			t.Errorf("the known key %s is reported unknown: %v", e.Key, e)
		case !errors.Is(e, ErrUnknownKey) && !known:
			t.Errorf("error names %q, which is no key or section: %v", e.Key, e)
		}
		if msg := e.Error(); !strings.Contains(msg, e.Key) || !strings.Contains(msg, e.Value) {
			t.Errorf("message %q does not name key %s and value %s", msg, e.Key, e.Value)
		}
		if secretKey(e.Key) && e.Value != "" {
			t.Errorf("error shows the value of secret %s: %v", e.Key, e)
		}
		if e.Source != "" && e.Source != path {
			t.Errorf("error says it comes from %q; only the file %s and the defaults were read: %v", e.Source, path, e)
		}
	}
}

// leafErrors returns the errors joined in err, each *Error whole.
func leafErrors(err error) []error {
	if _, ok := err.(*Error); ok {
		return []error{err}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var leaves []error
		for _, e := range j.Unwrap() {
			leaves = append(leaves, leafErrors(e)...)
		}
		return leaves
	}
	return []error{err}
}

// checkRoundTrip writes c out as YAML from Redacted, puts back what
// Redacted hides (nats.url's user information, and each secret that is
// set, in place of its *_file key), loads the file from dir and checks
// that it gives c again.
func checkRoundTrip(t *testing.T, c *Config, dir string) {
	t.Helper()
	m := c.Redacted()
	set := func(key string, v any) {
		parts := strings.Split(key, ".")
		sub := m
		for _, p := range parts[:len(parts)-1] {
			sub = sub[p].(map[string]any)
		}
		sub[parts[len(parts)-1]] = v
	}
	want := *c
	set("nats.url", c.NATS.URL)
	for _, f := range fields {
		if secret := f.get(c).String(); f.secret && secret != "" {
			set(f.key, secret)
			set(f.key+"_file", "")
			byKey[f.key+"_file"].get(&want).SetString("")
		}
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		t.Fatalf("write the configuration as YAML: %v", err)
	}
	c2, err := Load(LoadOptions{File: writeFile(t, dir, "again.yaml", string(out)), Env: mapEnv(nil)})
	if err != nil {
		t.Fatalf("the loaded configuration, written back out, does not load: %v\n%s", err, out)
	}
	equal(t, c2, &want)
}

// load runs Load on a file holding yamlText (none if empty), the
// process's environment with only the SUDOKU_ variables of env (see
// cleanEnv) and, if args is not nil, parsed's flags parsed from args.
func load(t testing.TB, yamlText string, env map[string]string, args []string) (*Config, error) {
	t.Helper()
	cleanEnv(t)
	for name, val := range env {
		t.Setenv(name, val)
	}
	var opts LoadOptions
	if yamlText != "" {
		opts.File = writeFile(t, t.TempDir(), "sudoku.yaml", yamlText)
	}
	if args != nil {
		opts.Flags = parsed(t, args...)
	}
	return Load(opts)
}

// parsed returns the flags of AddGlobalFlags and of the common keys
// after parsing args.
func parsed(t testing.TB, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	AddGlobalFlags(fs)
	AddKeyFlags(fs, "nats.url", "redis.addrs", "queue.batch_size", "worker.concurrency", "metrics.addr")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

// mapEnv returns a LoadOptions.Env looking names up in env.
func mapEnv(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// errorList returns the *Errors joined in err.
func errorList(err error) []*Error {
	var list []*Error
	var walk func(error)
	walk = func(err error) {
		if e, ok := err.(*Error); ok {
			list = append(list, e)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, err := range j.Unwrap() {
				walk(err)
			}
		}
	}
	walk(err)
	return list
}

// checkErrs checks that err joins exactly the *Errors wanted, in order.
func checkErrs(t *testing.T, err error, want []wantErr) {
	t.Helper()
	if err == nil {
		t.Fatal("got no error")
	}
	got := errorList(err)
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(got), len(want), err)
	}
	for i, w := range want {
		g := got[i]
		if g.Key != w.key {
			t.Errorf("error %d: key %q, want %q (%v)", i, g.Key, w.key, g)
		}
		if w.value != "" && g.Value != w.value {
			t.Errorf("error %d: value %s, want %s (%v)", i, g.Value, w.value, g)
		}
		if w.is != nil && !errors.Is(g, w.is) {
			t.Errorf("error %d: %v is not %v", i, g, w.is)
		}
		// The message names the key and the value.
		if msg := g.Error(); !strings.Contains(msg, w.key) || !strings.Contains(msg, g.Value) {
			t.Errorf("error %d: message %q does not name key and value", i, msg)
		}
	}
}

// equal fails t if got and want differ.
func equal(t *testing.T, got, want *Config) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		for _, f := range fields {
			g, w := f.get(got).Interface(), f.get(want).Interface()
			if !reflect.DeepEqual(g, w) {
				t.Errorf("%s = %v, want %v", f.key, g, w)
			}
		}
		if !t.Failed() {
			t.Errorf("got %+v, want %+v", got, want)
		}
	}
}
