package config

import (
	"bytes"
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

	"github.com/go-viper/mapstructure/v2"
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
	// Env, if not nil, stands for the process's environment, which Load
	// then leaves alone: for tests that run in parallel and so cannot set
	// it. An empty value counts as unset, so that `FOO=` in a compose file
	// does not wipe a setting.
	Env func(name string) (string, bool)
}

// Where a key's value came from, lowest rank first.
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

// loader is one Load: a viper instance with the defaults, the
// environment, the flags and the file as its layers.
type loader struct {
	v    *viper.Viper
	opts LoadOptions
	path string // the configuration file; "" for none
}

// Load returns the configuration from the defaults, the configuration
// file, the environment and the flags (see LoadOptions), validated with
// Validate. Its error joins every problem found, each one an *Error
// naming the key, the value (unless secret) and where it came from; an
// unknown key in the file is an *Error wrapping ErrUnknownKey. Load is
// safe to call from several goroutines.
func Load(opts LoadOptions) (*Config, error) {
	l := &loader{v: viper.New(), opts: opts}
	def := Default()
	for i := range fields {
		l.v.SetDefault(fields[i].key, fields[i].get(def).Interface())
	}
	errs := append(l.bindFlags(), l.bindEnv()...)
	l.path = opts.File
	if l.path == "" && opts.Flags != nil {
		if fl := opts.Flags.Lookup(FlagConfig); fl != nil {
			l.path = fl.Value.String()
		}
	}
	if l.path == "" {
		l.path, _ = l.env(EnvConfig)
	}
	if l.path != "" {
		if err := l.readFile(); err != nil {
			return nil, err
		}
		errs = append(errs, l.unknownKeys()...)
	}
	failed := map[string]bool{} // the keys and sections found wrong
	for _, err := range errs {
		if e, ok := err.(*Error); ok {
			failed[e.Key] = true
		}
	}
	cfg, decodeErrs := l.decode(def, failed)
	errs = append(errs, decodeErrs...)
	sortErrors(errs)

	// Validate says nothing of a key that did not decode (it has its
	// default), nor of a secret whose file could not be read.
	for _, err := range l.readSecretFiles(cfg) {
		failed[strings.TrimSuffix(err.(*Error).Key, "_file")] = true
		errs = append(errs, err)
	}
	for _, err := range cfg.problems() {
		if e := err.(*Error); !within(failed, e.Key) {
			e.Source = l.origin(e.Key).name
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// env looks name up in the environment: opts.Env's, or the process's.
func (l *loader) env(name string) (string, bool) {
	lookup := l.opts.Env
	if lookup == nil {
		lookup = os.LookupEnv
	}
	val, ok := lookup(name)
	return val, ok && val != ""
}

// bindFlags binds each flag of opts.Flags named after a key, which viper
// then reads when it is set on the command line. A flag of a secret is
// an error: other users can list a process's flags.
func (l *loader) bindFlags() []error {
	if l.opts.Flags == nil {
		return nil
	}
	var errs []error
	for i := range fields {
		f := &fields[i]
		fl := l.opts.Flags.Lookup(flagName(f.key))
		switch {
		case fl == nil:
		case f.secret:
			errs = append(errs, &Error{Key: f.key, Source: "--" + fl.Name, Err: fmt.Errorf(
				"a secret cannot be a flag (other users can list a process's flags); use $%s or %s_file", envName(f.key), f.key)})
		default:
			_ = l.v.BindPFlag(f.key, fl) // fails only for a nil flag
		}
	}
	return errs
}

// bindEnv has viper read each key from its variable, SUDOKU_ and the key
// in upper case with '.' as '_' (AutomaticEnv), or, when opts.Env stands
// for the environment, puts the variables it has in viper's top layer,
// where flags set on the command line must still win. A variable named
// after a section (SUDOKU_NATS) is an error: viper would take it for the
// section's value and hide each of its keys.
func (l *loader) bindEnv() []error {
	if l.opts.Env == nil {
		l.v.SetEnvPrefix(strings.TrimSuffix(EnvPrefix, "_"))
		l.v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
		l.v.AutomaticEnv()
	} else {
		for i := range fields {
			key := fields[i].key
			val, ok := l.env(envName(key))
			if ok && (l.opts.Flags == nil || !l.opts.Flags.Changed(flagName(key))) {
				l.v.Set(key, val)
			}
		}
	}
	var errs []error
	for sec := range sections {
		if _, ok := l.env(envName(sec)); ok {
			errs = append(errs, &Error{Key: sec, Source: "$" + envName(sec),
				Err: errors.New("is a section, not a setting: unset the variable")})
		}
	}
	for key := range removed {
		if _, ok := l.env(envName(key)); ok {
			errs = append(errs, removedError(key, "$"+envName(key)))
		}
	}
	return errs
}

// removed are the keys of older versions that no longer do anything, and
// what to do instead. Setting one, in the file or the environment, is an
// error saying so: a warning would have nowhere to go before the
// configuration, and with it the log, is loaded.
var removed = map[string]string{
	"worker.fetch": "a worker takes one batch at a time, from the job whose turn it is (docs/jobs.md); delete the setting",
}

// removedError returns the *Error of the removed key set in source.
func removedError(key, source string) *Error {
	return &Error{Key: key, Source: source, Err: fmt.Errorf("%w: removed: %s", ErrUnknownKey, removed[key])}
}

// errNotMapping is the error of a file whose YAML is not a mapping.
var errNotMapping = errors.New("the file must hold a mapping of keys to values")

// readFile reads the configuration file into viper's file layer. A file
// that cannot be read or parsed is an error naming the file.
func (l *loader) readFile() error {
	data, err := os.ReadFile(l.path)
	if err != nil {
		return fmt.Errorf("config file %s: %w", l.path, pathless(err))
	}
	l.v.SetConfigType("yaml") // whatever the file's name
	err = l.v.ReadConfig(bytes.NewReader(data))
	var typeErr *yaml.TypeError
	var parseErr viper.ConfigParseError
	switch {
	case errors.As(err, &typeErr):
		// Not YAML's message: it quotes the content, which may be a
		// secret (--config naming a password file by mistake).
		return fmt.Errorf("config file %s: %w", l.path, errNotMapping)
	case errors.As(err, &parseErr):
		return fmt.Errorf("config file %s: %w", l.path, parseErr.Unwrap())
	case err != nil:
		return fmt.Errorf("config file %s: %w", l.path, err)
	}
	return nil
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

// unknownKeys returns an *Error for each key of the file that is no
// setting. They are the keys viper holds beyond Config's, since it reads
// the environment and the flags for Config's keys only: what
// mapstructure's ErrorUnused finds, but every one of them, even beside a
// bad value, each named in full and with a "did you mean" for a typo.
func (l *loader) unknownKeys() []error {
	seen := map[string]bool{}
	var errs []error
	for _, key := range l.v.AllKeys() {
		name, unknown := unknownPart(key)
		if !unknown || seen[name] {
			continue
		}
		seen[name] = true
		if _, ok := removed[name]; ok {
			errs = append(errs, removedError(name, l.path))
			continue
		}
		e := &Error{Key: name, Source: l.path, Err: ErrUnknownKey}
		if near := nearestKey(name); near != "" {
			e.Err = fmt.Errorf("%w (did you mean %s?)", ErrUnknownKey, near)
		}
		errs = append(errs, e)
	}
	return errs
}

// unknownPart returns the part of key, a key of the file, that names
// nothing: the whole of it within the sections ("nats.urll"), else its
// first part outside them ("nat" for "nat.url"), with the parts that do
// not read plainly quoted (nats."u rl"). It returns false for a setting
// or a section, and for a key within a setting (nats.url.host: decode
// reports that nats.url is a mapping).
func unknownPart(key string) (string, bool) {
	parts := strings.Split(key, ".")
	for i := range parts {
		prefix := strings.Join(parts[:i+1], ".")
		if byKey[prefix] != nil || (sections[prefix] && i == len(parts)-1) {
			return "", false
		}
		if sections[prefix] {
			continue
		}
		for j, p := range parts[:i+1] {
			if !plainKey(p) { // "" or "a b": say which, quoted
				parts[j] = strconv.Quote(p)
			}
		}
		return strings.Join(parts[:i+1], "."), true
	}
	return "", false
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

// decode unmarshals viper's settings into a Config through decodeHook,
// strictly (viper's default is weak typing). It returns an *Error for
// each key or section that did not decode, adding them to failed; the
// keys in failed, or in a section in it, keep their defaults.
func (l *loader) decode(def *Config, failed map[string]bool) (*Config, []error) {
	cfg := &Config{}
	err := l.v.Unmarshal(cfg, viper.DecodeHook(decodeHook), func(dc *mapstructure.DecoderConfig) {
		dc.WeaklyTypedInput = false
	})
	var errs []error
	for _, err := range leaves(err) {
		de, ok := err.(*mapstructure.DecodeError)
		if !ok {
			errs = append(errs, fmt.Errorf("config: %w", err))
			continue
		}
		key, _, _ := strings.Cut(de.Name(), "[") // queue.backoff[1]: the list's
		if within(failed, key) {
			continue
		}
		failed[key] = true
		e := &Error{Key: key, Source: l.origin(key).name, Err: de.Unwrap()}
		if f := byKey[key]; (f == nil || !f.secret) && !errors.Is(e.Err, errMapping) {
			e.Value = formatRaw(l.v.Get(key))
		}
		errs = append(errs, e)
	}
	for i := range fields {
		if f := &fields[i]; within(failed, f.key) {
			f.get(cfg).Set(f.get(def))
		}
	}
	return cfg, errs
}

// leaves returns the *mapstructure.DecodeErrors in err, which joins and
// wraps them, and any other error it holds.
func leaves(err error) []error {
	switch e := err.(type) {
	case nil:
		return nil
	case *mapstructure.DecodeError:
		return []error{e}
	case interface{ Unwrap() []error }:
		var out []error
		for _, e := range e.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	case interface{ Unwrap() error }:
		if errors.As(err, new(*mapstructure.DecodeError)) {
			return leaves(e.Unwrap())
		}
	}
	return []error{err}
}

// within reports whether key, or a section holding it, is in set.
func within(set map[string]bool, key string) bool {
	for {
		if set[key] {
			return true
		}
		i := strings.LastIndexByte(key, '.')
		if i < 0 {
			return false
		}
		key = key[:i]
	}
}

// origin returns where key's value came from, for a message: viper does
// not say which of its layers gave a value, so ask them in its order.
func (l *loader) origin(key string) origin {
	name := flagName(key)
	if f := byKey[key]; f != nil && !f.secret && l.opts.Flags != nil && l.opts.Flags.Changed(name) {
		return origin{fromFlag, "--" + name}
	}
	if _, ok := l.env(envName(key)); ok {
		return origin{fromEnv, "$" + envName(key)}
	}
	if l.path != "" && l.v.InConfig(key) {
		return origin{fromFile, l.path}
	}
	return origin{}
}

// readSecretFiles fills each secret from its _file key. When both are
// set, the one from the higher-precedence source wins; both from the same
// source is an error.
func (l *loader) readSecretFiles(cfg *Config) []error {
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
		fileFrom, secretFrom := l.origin(ff.key), l.origin(f.key)
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

// The errors of values of the wrong type.
var (
	errString   = errors.New("must be a string (quote it in YAML)")
	errBool     = errors.New("must be true or false")
	errInt      = errors.New("must be an integer")
	errDuration = errors.New(`must be a duration such as "500ms", "30s" or "1h30m"`)
	errUnit     = errors.New(`a duration needs a unit, such as "30s"`)
	errList     = errors.New("must be a list or a comma-separated string")
	errNullItem = errors.New("must not hold a null item")
	errMapping  = errors.New("must be a value, not a mapping")
	errSection  = errors.New("must be a mapping of keys to values")
)

// decodeHook converts what viper holds for a key (a default, a YAML
// value, or the text of a variable or a flag) to the key's type, for
// mapstructure. It is stricter than viper's own: a bare number is not a
// duration (30 would be 30ns), a fraction is not an integer, and a YAML
// number is not a string (0123 would be "83").
var decodeHook = mapstructure.ComposeDecodeHookFunc(shapeHook, listHook, durationHook, scalarHook)

// shapeHook refuses a mapping for a setting and anything else for a
// section.
func shapeHook(from, to reflect.Type, data any) (any, error) {
	switch isMap := from.Kind() == reflect.Map; {
	case to.Kind() == reflect.Struct && !isMap:
		return nil, errSection
	case to.Kind() != reflect.Struct && isMap:
		return nil, errMapping
	}
	return data, nil
}

// listHook makes a list of a comma-separated string (a variable or a
// flag) or of a YAML sequence, with its strings trimmed and the empty
// ones left out; mapstructure converts its items.
func listHook(from, to reflect.Type, data any) (any, error) {
	if to.Kind() != reflect.Slice {
		return data, nil
	}
	var items []any
	switch v := reflect.ValueOf(data); from.Kind() {
	case reflect.String:
		for _, s := range strings.Split(v.String(), ",") {
			items = append(items, s)
		}
	case reflect.Slice:
		for i := range v.Len() {
			items = append(items, v.Index(i).Interface())
		}
	default:
		return nil, errList
	}
	kept := make([]any, 0, len(items))
	for _, item := range items {
		s, isString := item.(string)
		switch {
		case item == nil:
			return nil, errNullItem
		case isString && strings.TrimSpace(s) == "":
			continue
		case isString:
			item = strings.TrimSpace(s)
		}
		kept = append(kept, item)
	}
	return kept, nil
}

// durationHook parses a duration such as "30s"; of numbers, it takes
// only 0.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType || from == durationType {
		return data, nil
	}
	v := reflect.ValueOf(data)
	if from.Kind() == reflect.String {
		s := strings.TrimSpace(v.String())
		if d, err := time.ParseDuration(s); err == nil {
			return d, nil
		}
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return nil, errUnit
		}
		return nil, errDuration
	}
	if v.CanInt() || v.CanUint() || v.CanFloat() {
		if v.IsZero() {
			return time.Duration(0), nil
		}
		return nil, errUnit
	}
	return nil, errDuration
}

// scalarHook parses the text of a boolean or an integer, takes a YAML
// number for an integer only if it is one, and refuses anything but a
// string for a string.
func scalarHook(from, to reflect.Type, data any) (any, error) {
	v := reflect.ValueOf(data)
	switch to.Kind() {
	case reflect.String:
		if from.Kind() != reflect.String {
			return nil, errString
		}
	case reflect.Bool:
		if from.Kind() == reflect.String {
			b, err := strconv.ParseBool(strings.TrimSpace(v.String()))
			if err != nil {
				return nil, errBool
			}
			return b, nil
		}
		if from.Kind() != reflect.Bool {
			return nil, errBool
		}
	case reflect.Int, reflect.Int64:
		if to == durationType {
			return data, nil
		}
		n, ok := toInt(v)
		if !ok || reflect.New(to).Elem().OverflowInt(n) {
			return nil, errInt
		}
		return n, nil
	}
	return data, nil
}

// toInt converts an integer, an integral float or a decimal string.
func toInt(v reflect.Value) (int64, bool) {
	switch {
	case v.CanInt():
		return v.Int(), true
	case v.CanUint():
		return int64(v.Uint()), v.Uint() <= math.MaxInt64
	case v.CanFloat():
		f := v.Float()
		return int64(f), f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64
	case v.Kind() == reflect.String:
		n, err := strconv.ParseInt(strings.TrimSpace(v.String()), 10, 64)
		return n, err == nil
	}
	return 0, false
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
