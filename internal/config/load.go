package config

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts the name of every environment variable of a key.
const EnvPrefix = "SUDOKU_"

// EnvConfig is the environment variable naming the configuration file
// when LoadOptions.File and the --config flag are empty.
const EnvConfig = EnvPrefix + "CONFIG"

// FlagConfig is the name of the flag, defined by AddGlobalFlags, naming the
// configuration file.
const FlagConfig = "config"

// LoadOptions says where Load finds the settings.
type LoadOptions struct {
	// File is the configuration file (YAML; JSON is YAML too). If empty,
	// Load uses the --config flag of Flags, then $SUDOKU_CONFIG; if all
	// are empty, no file is read. A named file must exist.
	File string
	// Flags are the command line's flags; those named after a key
	// (--nats-url for nats.url, see AddKeyFlags) and set on the command line
	// override the environment and the file. Flags may be nil.
	Flags *pflag.FlagSet
	// Env looks up an environment variable; nil means os.LookupEnv.
	// An empty value counts as unset, so that `FOO=` in a compose file
	// does not wipe a setting.
	Env func(name string) (string, bool)
}

// source ranks: where a key's value came from.
const (
	fromDefault = iota
	fromFile
	fromEnv
	fromFlag
)

// origin is where one key's value came from.
type origin struct {
	rank int
	name string // "" for a default, else the file, $VAR or --flag
}

// Load returns the configuration from the defaults, the configuration
// file, the environment and the flags (see LoadOptions), validated with
// Validate. Its error joins every problem found, each one an *Error
// naming the key, the value (unless secret) and where it came from; an
// unknown key in the file is an *Error wrapping ErrUnknownKey. Load is
// safe to call from several goroutines.
func Load(opts LoadOptions) (*Config, error) {
	lookup := opts.Env
	if lookup == nil {
		lookup = os.LookupEnv
	}
	env := func(name string) (string, bool) {
		val, ok := lookup(name)
		return val, ok && val != ""
	}

	// viper's own AutomaticEnv and BindPFlag are not used: AutomaticEnv
	// reads os.Getenv with no way to substitute Env, and it only works
	// for keys viper knows (spf13/viper#761). Looking up each known key
	// explicitly and layering with Set (later calls win) gives the same
	// precedence: flags, environment, file, defaults.
	v := viper.New()
	origins := make(map[string]origin, len(fields))

	path := opts.File
	if path == "" && opts.Flags != nil {
		if fl := opts.Flags.Lookup(FlagConfig); fl != nil {
			path = fl.Value.String()
		}
	}
	if path == "" {
		path, _ = env(EnvConfig)
	}
	var errs []error
	if path != "" {
		keyErrs, err := readFile(v, path)
		if err != nil {
			return nil, err
		}
		errs = append(errs, keyErrs...)
		for i := range fields {
			if v.InConfig(fields[i].key) {
				origins[fields[i].key] = origin{fromFile, path}
			}
		}
	}

	def := Default()
	for i := range fields {
		f := &fields[i]
		v.SetDefault(f.key, f.get(def).Interface())
	}

	for i := range fields {
		f := &fields[i]
		name := envName(f.key)
		if val, ok := env(name); ok {
			v.Set(f.key, val)
			origins[f.key] = origin{fromEnv, "$" + name}
		}
	}

	if opts.Flags != nil {
		for i := range fields {
			f := &fields[i]
			name := flagName(f.key)
			fl := opts.Flags.Lookup(name)
			switch {
			case fl == nil:
			case f.secret:
				errs = append(errs, &Error{Key: f.key, Source: "--" + name, Err: fmt.Errorf(
					"a secret cannot be a flag (other users can list a process's flags); use $%s or %s_file", envName(f.key), f.key)})
			case fl.Changed:
				if sv, ok := fl.Value.(pflag.SliceValue); ok {
					v.Set(f.key, sv.GetSlice())
				} else {
					v.Set(f.key, fl.Value.String())
				}
				origins[f.key] = origin{fromFlag, "--" + name}
			}
		}
	}

	// Convert every value, then check the whole: each key that did not
	// convert keeps its default, and Validate's verdict on such a key is
	// left out as noise.
	cfg := Default()
	failed := map[string]bool{}
	for i := range fields {
		f := &fields[i]
		raw := v.Get(f.key)
		val, err := convert(raw, f.typ)
		if err != nil {
			e := &Error{Key: f.key, Source: origins[f.key].name, Err: err}
			if !f.secret {
				e.Value = formatRaw(raw)
			}
			errs = append(errs, e)
			failed[f.key] = true
			continue
		}
		f.get(cfg).Set(val)
	}
	for _, err := range readSecretFiles(cfg, origins) {
		failed[strings.TrimSuffix(err.(*Error).Key, "_file")] = true
		errs = append(errs, err)
	}
	for _, err := range cfg.problems() {
		e := err.(*Error)
		if !failed[e.Key] {
			e.Source = origins[e.Key].name
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// readFile reads the configuration file at path into v's file layer. A
// file that cannot be read or parsed is an error; keys that are unknown
// or in the wrong shape are reported in errs and left out, so that Load
// goes on and reports every other problem too.
func readFile(v *viper.Viper, path string) (errs []error, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, pathless(err))
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if doc == nil { // empty, or only comments
		return nil, nil
	}
	// Not viper's own reading: its error for a file that is not a
	// mapping quotes the content, which may be a secret (--config naming
	// a password file by mistake), and its keys need checking anyway.
	top, ok := toMap(doc)
	if !ok {
		return nil, fmt.Errorf("config file %s: the file must hold a mapping of keys to values", path)
	}
	clean := checkKeys(top, "", path, &errs)
	sortErrors(errs)
	if err := v.MergeConfigMap(clean); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return errs, nil
}

// pathless returns the cause of a *fs.PathError ("no such file or
// directory"), for a message that names the file itself; other errors
// are returned as they are.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// checkKeys returns the entries of m, a mapping of the file at the keys
// starting with prefix, that are settings or sections, and appends an
// *Error to errs for each other one.
func checkKeys(m map[string]any, prefix, path string, errs *[]error) map[string]any {
	clean := make(map[string]any, len(m))
	for name, val := range m {
		key := prefix + strings.ToLower(name)
		_, isMap := toMap(val)
		switch {
		case byKey[key] != nil && isMap:
			*errs = append(*errs, &Error{Key: key, Source: path, Err: errors.New("must be a value, not a mapping")})
		case byKey[key] != nil:
			clean[name] = val
		case sections[key] && val == nil: // a section with every key commented out
		case sections[key] && isMap:
			sub, _ := toMap(val)
			clean[name] = checkKeys(sub, key+".", path, errs)
		case sections[key]:
			*errs = append(*errs, &Error{Key: key, Value: formatRaw(val), Source: path,
				Err: errors.New("must be a mapping of keys to values")})
		default:
			if !plainKey(name) { // "" or "a b": say which, quoted
				key = prefix + strconv.Quote(name)
			}
			e := &Error{Key: key, Source: path, Err: ErrUnknownKey}
			if near := nearestKey(key); near != "" {
				e.Err = fmt.Errorf("%w (did you mean %s?)", ErrUnknownKey, near)
			}
			*errs = append(*errs, e)
		}
	}
	return clean
}

// toMap returns a YAML mapping as a map[string]any; YAML keys that are
// not strings (1: x) are formatted.
func toMap(val any) (map[string]any, bool) {
	switch m := val.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[fmt.Sprint(k)] = v
		}
		return out, true
	}
	return nil, false
}

// nearestKey returns the known key closest to an unknown one, if it is
// close enough to be a typo.
func nearestKey(key string) string {
	best, bestDist := "", 4
	for i := range fields {
		if d := editDistance(key, fields[i].key); d < bestDist {
			best, bestDist = fields[i].key, d
		}
	}
	return best
}

// editDistance returns the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// readSecretFiles fills each secret from its _file key. When both are
// set, the one from the higher-precedence source wins; both from the same
// source is an error.
func readSecretFiles(cfg *Config, origins map[string]origin) []error {
	var errs []error
	for i := range fields {
		f := &fields[i]
		if !f.secret {
			continue
		}
		ff := byKey[f.key+"_file"]
		path := ff.get(cfg).String()
		if path == "" {
			continue
		}
		fileFrom, secretFrom := origins[ff.key], origins[f.key]
		if f.get(cfg).String() != "" {
			if secretFrom.rank > fileFrom.rank {
				continue
			}
			if secretFrom.rank == fileFrom.rank {
				errs = append(errs, &Error{Key: ff.key, Value: strconv.Quote(path), Source: fileFrom.name,
					Err: fmt.Errorf("%s is set too; set only one of them", f.key)})
				continue
			}
		}
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, &Error{Key: ff.key, Value: strconv.Quote(path), Source: fileFrom.name, Err: err})
			continue
		}
		secret := strings.TrimSpace(string(data))
		if secret == "" {
			errs = append(errs, &Error{Key: ff.key, Value: strconv.Quote(path), Source: fileFrom.name,
				Err: errors.New("the file is empty")})
			continue
		}
		f.get(cfg).SetString(secret)
	}
	return errs
}

var (
	errString   = errors.New("must be a string (quote it in YAML)")
	errBool     = errors.New("must be true or false")
	errInt      = errors.New("must be an integer")
	errDuration = errors.New(`must be a duration such as "500ms", "30s" or "1h30m"`)
	errUnit     = errors.New(`a duration needs a unit, such as "30s"`)
	errList     = errors.New("must be a list or a comma-separated string")
)

// convert returns raw, a value from viper (a default, a YAML value, or a
// string from the environment or a flag), as a value of type t. It is
// stricter than viper's own decoding: a bare number is not a duration
// (30 would be 30ns), a float is not an integer, and a YAML number is not
// a string (0123 would be 83).
func convert(raw any, t reflect.Type) (reflect.Value, error) {
	out := reflect.New(t).Elem()
	rv := reflect.ValueOf(raw)
	if !rv.IsValid() {
		return out, errors.New("must not be null")
	}
	switch {
	case t == durationType:
		d, err := toDuration(rv)
		out.SetInt(int64(d))
		return out, err
	case t.Kind() == reflect.Slice:
		items, err := toList(rv)
		if err != nil {
			return out, err
		}
		out = reflect.MakeSlice(t, 0, len(items))
		for _, item := range items {
			elem, err := convert(item.Interface(), t.Elem())
			if err != nil {
				return out, err
			}
			out = reflect.Append(out, elem)
		}
		return out, nil
	}
	switch t.Kind() {
	case reflect.String:
		if rv.Kind() != reflect.String {
			return out, errString
		}
		out.SetString(rv.String())
	case reflect.Bool:
		switch rv.Kind() {
		case reflect.Bool:
			out.SetBool(rv.Bool())
		case reflect.String:
			b, err := strconv.ParseBool(strings.TrimSpace(rv.String()))
			if err != nil {
				return out, errBool
			}
			out.SetBool(b)
		default:
			return out, errBool
		}
	case reflect.Int, reflect.Int64:
		n, err := toInt(rv)
		if err != nil || out.OverflowInt(n) {
			return out, errInt
		}
		out.SetInt(n)
	default:
		// collectFields accepts only the types handled above.
		panic("config: convert: unsupported type " + t.String())
	}
	return out, nil
}

// toInt converts an integer, an integral float or a decimal string.
func toInt(rv reflect.Value) (int64, error) {
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if rv.Uint() > math.MaxInt64 {
			return 0, errInt
		}
		return int64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, errInt
		}
		return int64(f), nil
	case reflect.String:
		return strconv.ParseInt(strings.TrimSpace(rv.String()), 10, 64)
	}
	return 0, errInt
}

// toDuration converts a time.Duration, a string such as "30s", or the
// number 0.
func toDuration(rv reflect.Value) (time.Duration, error) {
	if rv.Type() == durationType {
		return time.Duration(rv.Int()), nil
	}
	switch rv.Kind() {
	case reflect.String:
		s := strings.TrimSpace(rv.String())
		d, err := time.ParseDuration(s)
		if err != nil {
			if _, numErr := strconv.ParseFloat(s, 64); numErr == nil {
				return 0, errUnit
			}
			return 0, errDuration
		}
		return d, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if rv.IsZero() {
			return 0, nil
		}
		return 0, errUnit
	}
	return 0, errDuration
}

// toList returns the items of a list, or of a comma-separated string,
// with white space around string items trimmed and empty ones dropped.
func toList(rv reflect.Value) ([]reflect.Value, error) {
	var items []reflect.Value
	switch rv.Kind() {
	case reflect.String:
		for _, s := range strings.Split(rv.String(), ",") {
			items = append(items, reflect.ValueOf(s))
		}
	case reflect.Slice, reflect.Array:
		for i := range rv.Len() {
			item := rv.Index(i)
			for item.Kind() == reflect.Interface && !item.IsNil() {
				item = item.Elem()
			}
			items = append(items, item)
		}
	default:
		return nil, errList
	}
	kept := items[:0]
	for _, item := range items {
		if item.Kind() == reflect.String {
			s := strings.TrimSpace(item.String())
			if s == "" {
				continue
			}
			item = reflect.ValueOf(s)
		}
		if item.Kind() == reflect.Interface { // a null item
			return nil, errors.New("must not hold a null item")
		}
		kept = append(kept, item)
	}
	return kept, nil
}

// formatRaw formats a value as given, for an error message: strings
// quoted, long values cut.
func formatRaw(raw any) string {
	var s string
	switch x := raw.(type) {
	case string:
		s = strconv.Quote(x)
	case []any:
		parts := make([]string, len(x))
		for i, item := range x {
			parts[i] = formatRaw(item)
		}
		s = "[" + strings.Join(parts, ", ") + "]"
	case []string:
		parts := make([]string, len(x))
		for i, item := range x {
			parts[i] = strconv.Quote(item)
		}
		s = "[" + strings.Join(parts, ", ") + "]"
	case nil:
		s = "null"
	default:
		s = fmt.Sprint(x)
	}
	const maxLen = 80
	if len(s) > maxLen {
		s = s[:maxLen] + "..."
	}
	return s
}

// flagUsage is the help of the flags AddKeyFlags defines, with the
// placeholder of the value in back quotes (see pflag.UnquoteUsage). A key
// not listed gets a help naming the key.
var flagUsage = map[string]string{
	"nats.url":           "NATS server `URLs`, comma-separated",
	"redis.addrs":        "Redis `host:port` addresses, comma-separated: one server, a cluster, or Sentinels with redis.master_name",
	"queue.batch_size":   "the most `puzzles` per queue message",
	"worker.concurrency": "solving goroutines per worker; 0 means GOMAXPROCS",
	"metrics.addr":       "serve /metrics, /healthz and /readyz on this `host:port`; empty: off",
	"log.level":          "log `level`: debug, info, warn or error",
	"log.format":         "log `format`: text or json",
	"job.wait_timeout":   "stop waiting for the results after this `duration` (the job goes on); 0: wait as long as it takes",
}

// AddGlobalFlags defines on fs the flags that every command has, whatever
// it connects to: --config, --log-level and --log-format. A program
// defines them once, as persistent flags of its root command, and each
// command the flags of the keys it uses with AddKeyFlags.
func AddGlobalFlags(fs *pflag.FlagSet) {
	fs.String(FlagConfig, "", "read settings from this YAML `file` (default $"+EnvConfig+"; reference: configs/sudoku.yaml)")
	AddKeyFlags(fs, "log.level", "log.format")
}

// AddKeyFlags defines on fs one flag for each key: named after the key
// (--nats-url for nats.url), with the key's default and a help naming
// its environment variable. Load applies them when they are set on the
// command line. A command defines only the flags of the keys it uses, so
// that its help lists nothing that does nothing; every key stays settable
// through the environment and the file. AddKeyFlags panics for an unknown
// key, for a secret (Load refuses secrets as flags), and, like pflag, for
// a flag already defined on fs.
func AddKeyFlags(fs *pflag.FlagSet, keys ...string) {
	d := Default()
	for _, key := range keys {
		f := byKey[key]
		if f == nil {
			panic("config: AddKeyFlags: no key " + key)
		}
		if f.secret {
			panic("config: AddKeyFlags: " + key + " is a secret, which cannot be a flag")
		}
		name := flagName(key)
		usage := flagUsage[key]
		if usage == "" {
			usage = "set " + key
		}
		usage += " ($" + envName(key) + ")"
		def := f.get(d)
		switch {
		case f.typ == durationType:
			fs.Duration(name, time.Duration(def.Int()), usage)
		case f.typ.Kind() == reflect.Slice:
			// []string, or []time.Duration as strings: Load converts
			// a flag's items like those of the environment.
			items := make([]string, def.Len())
			for i := range items {
				items[i] = fmt.Sprint(def.Index(i).Interface())
			}
			fs.StringSlice(name, items, usage)
		case f.typ.Kind() == reflect.Bool:
			fs.Bool(name, def.Bool(), usage)
		case f.typ.Kind() == reflect.Int:
			fs.Int(name, int(def.Int()), usage)
		case f.typ.Kind() == reflect.Int64:
			fs.Int64(name, def.Int(), usage)
		default:
			fs.String(name, def.String(), usage)
		}
	}
}

// plainKey reports whether name, a key of the file, reads unquoted in a
// message: not empty, and only letters, digits, '_' and '-'.
func plainKey(name string) bool {
	return name != "" && !strings.ContainsFunc(name, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-'
	})
}
