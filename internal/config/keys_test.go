package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// The tests of this file go over every key of Config (the fields table),
// so that a key added to Config is tested with no line added here, unless
// Validate constrains its values (samples) or it needs another key beside
// it (companions).

// samples are the sample values, as text, of the keys whose values
// Validate constrains; sample gives the others from the key's type.
var samples = map[string][3]string{
	"nats.url":            {"nats://n1:4222", "nats://n2:4222, tls://n3:4443", "n4:4222"},
	"redis.addrs":         {"r1:6379", "r2:6379, r3:6380", "r4:6379"},
	"queue.storage":       {"memory", "file", "memory"},
	"log.level":           {"debug", "warn", "error"},
	"log.format":          {"json", "text", "json"},
	"metrics.addr":        {":9091", "127.0.0.1:9092", "[::1]:9093"},
	"serve.addr":          {":8081", "127.0.0.1:8082", "[::1]:8083"},
	"serve.allowed_hosts": {"a.example", "b.example:8080, c.example", "[::1]:9"},
	"serve.allowed_origins": {"https://a.example", "https://b.example, http://c.example:8080",
		"https://d.example"},
}

// companions are the settings a key needs beside it to pass Validate.
var companions = map[string]map[string]string{
	"nats.user":           {"nats.password": "pw"},
	"nats.password":       {"nats.user": "u"},
	"nats.password_file":  {"nats.user": "u"},
	"nats.tls.cert_file":  {"nats.tls.key_file": "k.pem"},
	"nats.tls.key_file":   {"nats.tls.cert_file": "c.pem"},
	"redis.tls.cert_file": {"redis.tls.key_file": "k.pem"},
	"redis.tls.key_file":  {"redis.tls.cert_file": "c.pem"},
}

// sampleSecret is the secret the file of the i-th sample of a *_file key
// holds: the file secretDir writes as "sample-<i>".
func sampleSecret(i int) string { return "sample-secret-" + strconv.Itoa(i) }

// secretFileKey reports whether f names the file of a secret
// (nats.password_file).
func secretFileKey(f *field) bool {
	s := byKey[strings.TrimSuffix(f.key, "_file")]
	return strings.HasSuffix(f.key, "_file") && s != nil && s.secret
}

// sample returns the i-th sample (i = 1, 2, 3) of f, as the environment
// and a command line write it: a value Load accepts (with the key's
// companions), other than the key's default for i = 1 and other than the
// (i-1)-th. dir holds the files secretDir writes.
func sample(f *field, i int, dir string) string {
	if s, ok := samples[f.key]; ok {
		return s[i-1]
	}
	if secretFileKey(f) {
		return filepath.Join(dir, "sample-"+strconv.Itoa(i))
	}
	def := f.get(Default())
	switch {
	case f.typ == durationType:
		return (time.Duration(def.Int()) + time.Duration(i)*time.Second).String()
	case f.typ == reflect.TypeFor[[]time.Duration]():
		return strings.Repeat(strconv.Itoa(i)+"s,", i) + "1m"
	case f.typ.Kind() == reflect.Bool:
		return strconv.FormatBool(def.Bool() != (i%2 == 1))
	case f.typ.Kind() == reflect.Int, f.typ.Kind() == reflect.Int64:
		return strconv.FormatInt(def.Int()+int64(i), 10)
	case f.typ.Kind() == reflect.String:
		return "x" + strconv.Itoa(i)
	}
	panic("sample: teach the test the type of " + f.key)
}

// parseSample returns the value Load must give f for text, a sample.
func parseSample(t testing.TB, f *field, text string) any {
	t.Helper()
	var v any
	var err error
	switch {
	case f.typ == durationType:
		v, err = time.ParseDuration(text)
	case f.typ == reflect.TypeFor[[]time.Duration]():
		var ds []time.Duration
		for _, item := range strings.Split(text, ",") {
			d, e := time.ParseDuration(strings.TrimSpace(item))
			ds, err = append(ds, d), errors.Join(err, e)
		}
		v = ds
	case f.typ == reflect.TypeFor[[]string]():
		var items []string
		for _, item := range strings.Split(text, ",") {
			items = append(items, strings.TrimSpace(item))
		}
		v = items
	case f.typ.Kind() == reflect.Bool:
		v, err = strconv.ParseBool(text)
	case f.typ.Kind() == reflect.Int:
		v, err = strconv.Atoi(text)
	case f.typ.Kind() == reflect.Int64:
		v, err = strconv.ParseInt(text, 10, 64)
	case f.typ.Kind() == reflect.String:
		v = reflect.ValueOf(text).Convert(f.typ).Interface()
	}
	if err != nil {
		t.Fatalf("sample %q of %s: %v", text, f.key, err)
	}
	return v
}

// yamlFile returns a configuration file setting each key of settings to
// its text, written as YAML writes a value of the key's type: lists as
// sequences, booleans and integers bare, anything else a string.
func yamlFile(t testing.TB, settings map[string]string) string {
	t.Helper()
	doc := map[string]any{}
	for key, text := range settings {
		f := byKey[key]
		var val any = text
		switch {
		case f.typ.Kind() == reflect.Slice:
			items := []string{}
			for _, item := range strings.Split(text, ",") {
				items = append(items, strings.TrimSpace(item))
			}
			val = items
		case f.typ == durationType:
		case f.typ.Kind() == reflect.Bool, f.typ.Kind() == reflect.Int, f.typ.Kind() == reflect.Int64:
			val = parseSample(t, f, text)
		}
		parts := strings.Split(key, ".")
		m := doc
		for _, p := range parts[:len(parts)-1] {
			if m[p] == nil {
				m[p] = map[string]any{}
			}
			m = m[p].(map[string]any)
		}
		m[parts[len(parts)-1]] = val
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// cleanEnv unsets, for the rest of the test, every variable of the
// process's environment that starts with SUDOKU_, so that Load sees only
// those the test sets.
func cleanEnv(t testing.TB) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, EnvPrefix) {
			t.Setenv(name, "") // restores the value after the test
			if err := os.Unsetenv(name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// sources are the settings of one Load: a file, the environment (set in
// the process's, see cleanEnv) and flags (defined with AddKeyFlags).
type sources struct {
	file, env, flags map[string]string
}

// load runs Load on s, in a clean environment.
func (s sources) load(t *testing.T) (*Config, LoadOptions, error) {
	t.Helper()
	cleanEnv(t)
	var opts LoadOptions
	if s.file != nil {
		opts.File = writeFile(t, t.TempDir(), "sudoku.yaml", yamlFile(t, s.file))
	}
	for key, text := range s.env {
		t.Setenv(envName(key), text)
	}
	if s.flags != nil {
		opts.Flags = pflag.NewFlagSet("test", pflag.ContinueOnError)
		var args []string
		for key, text := range s.flags {
			AddKeyFlags(opts.Flags, key)
			args = append(args, "--"+flagName(key)+"="+text)
		}
		if err := opts.Flags.Parse(args); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Load(opts)
	return c, opts, err
}

// with returns a copy of m (nil as empty) with key set to text.
func with(m map[string]string, key, text string) map[string]string {
	out := map[string]string{key: text}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestEveryKey sets every key from the file, from the environment and,
// unless it is a secret, from its flag, and checks that Load gives the
// defaults with that one field changed: for a secret's *_file key, the
// secret too. A variable of the environment gives the same through
// LoadOptions.Env as through the process's environment.
func TestEveryKey(t *testing.T) {
	dir := secretDir(t)
	for i := range fields {
		f := &fields[i]
		text := sample(f, 1, dir)
		want := Default()
		for key, text := range companions[f.key] {
			byKey[key].get(want).Set(reflect.ValueOf(parseSample(t, byKey[key], text)))
		}
		f.get(want).Set(reflect.ValueOf(parseSample(t, f, text)))
		if secretFileKey(f) {
			byKey[strings.TrimSuffix(f.key, "_file")].get(want).SetString(sampleSecret(1))
		}
		from := map[string]sources{
			"file": {file: with(companions[f.key], f.key, text)},
			"env":  {file: companions[f.key], env: map[string]string{f.key: text}},
		}
		if !f.secret {
			from["flag"] = sources{file: companions[f.key], flags: map[string]string{f.key: text}}
		}
		for name, s := range from {
			t.Run(f.key+"/"+name, func(t *testing.T) {
				c, opts, err := s.load(t)
				if err != nil {
					t.Fatalf("%s = %q: %v", f.key, text, err)
				}
				equal(t, c, want)
				if s.env == nil {
					return
				}
				opts.Env = mapEnv(map[string]string{envName(f.key): text})
				cleanEnv(t)
				if c, err = Load(opts); err != nil {
					t.Fatalf("through LoadOptions.Env: %v", err)
				}
				equal(t, c, want)
			})
		}
	}
}

// TestEveryKeyPrecedence sets every key from more and more sources, each
// with another value, and checks that the highest wins: flag, then
// environment, then file, then default.
func TestEveryKeyPrecedence(t *testing.T) {
	dir := secretDir(t)
	for i := range fields {
		f := &fields[i]
		t.Run(f.key, func(t *testing.T) {
			comp := companions[f.key]
			file, env, flag := sample(f, 1, dir), sample(f, 2, dir), sample(f, 3, dir)
			steps := []struct {
				name string
				s    sources
				want any
			}{
				{"default", sources{file: comp}, f.get(Default()).Interface()},
				{"file over default", sources{file: with(comp, f.key, file)}, parseSample(t, f, file)},
				{"environment over file", sources{file: with(comp, f.key, file), env: map[string]string{f.key: env}},
					parseSample(t, f, env)},
				{"flag over environment", sources{file: with(comp, f.key, file), env: map[string]string{f.key: env},
					flags: map[string]string{f.key: flag}}, parseSample(t, f, flag)},
			}
			if comp != nil { // its default does not pass Validate beside its companions
				steps = steps[1:]
			}
			if f.secret { // no flag
				steps = steps[:len(steps)-1]
			}
			for _, step := range steps {
				c, _, err := step.s.load(t)
				if err != nil {
					t.Fatalf("%s: %v", step.name, err)
				}
				if got := f.get(c).Interface(); !reflect.DeepEqual(got, step.want) {
					t.Errorf("%s: %s = %v, want %v", step.name, f.key, got, step.want)
				}
			}
		})
	}
}

// TestEveryKeyBadValue gives every key a value it cannot have, from the
// file (a mapping) and, for the keys whose type refuses some text, from
// the environment; each error names the key, the value unless it is a
// secret, and where it came from.
func TestEveryKeyBadValue(t *testing.T) {
	for i := range fields {
		f := &fields[i]
		t.Run(f.key+"/file", func(t *testing.T) {
			cleanEnv(t)
			parts := strings.Split(f.key, ".")
			text := ""
			for j, p := range parts {
				text += strings.Repeat("  ", j) + p + ":\n"
			}
			text += strings.Repeat("  ", len(parts)) + "bad: 1\n"
			path := writeFile(t, t.TempDir(), "sudoku.yaml", text)
			_, err := Load(LoadOptions{File: path})
			checkErrs(t, err, []wantErr{{key: f.key}})
			if e := errorList(err)[0]; e.Source != path {
				t.Errorf("source %q, want %q: %v", e.Source, path, e)
			}
		})
		var bad string
		switch f.typ.Kind() {
		case reflect.Bool, reflect.Int, reflect.Int64:
			bad = "lots"
		case reflect.Slice:
			if f.typ.Elem() == durationType {
				bad = "1s,soon"
			}
		}
		if bad == "" {
			continue
		}
		t.Run(f.key+"/env", func(t *testing.T) {
			_, _, err := sources{env: map[string]string{f.key: bad}}.load(t)
			checkErrs(t, err, []wantErr{{key: f.key, value: strconv.Quote(bad)}})
			if e := errorList(err)[0]; e.Source != "$"+envName(f.key) {
				t.Errorf("source %q, want $%s: %v", e.Source, envName(f.key), e)
			}
		})
	}
}

// sampleFiles returns configuration files setting each key to its first
// sample, for the fuzz test's seeds; @DIR@ stands for secretDir's folder.
func sampleFiles(t testing.TB) []string {
	var files []string
	for i := range fields {
		f := &fields[i]
		files = append(files, yamlFile(t, with(companions[f.key], f.key, sample(f, 1, "@DIR@"))))
	}
	return files
}

// TestSampleFilesDiffer: each sample file sets its key to another value
// than the default, so that TestEveryKey would see a key Load ignores.
func TestSampleFilesDiffer(t *testing.T) {
	dir := secretDir(t)
	for i := range fields {
		f := &fields[i]
		for n := 1; n <= 3; n++ {
			prev := f.get(Default()).Interface()
			if n > 1 {
				prev = parseSample(t, f, sample(f, n-1, dir))
			}
			if got := parseSample(t, f, sample(f, n, dir)); reflect.DeepEqual(got, prev) {
				t.Errorf("%s: sample %d is %v, as the one before it", f.key, n, got)
			}
		}
	}
	if len(sampleFiles(t)) != len(fields) {
		t.Error("not a file per key")
	}
}
