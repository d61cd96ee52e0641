package config

import (
	"log/slog"
	"reflect"
	"time"
)

// LogValue implements slog.LogValuer: the effective settings as nested
// groups (nats, redis, ...) keyed like the configuration file, for one
// start-up log line such as
//
//	logger.Info("starting worker", "config", cfg)
//
// Secrets that are set show as "[redacted]", unset ones are left out,
// and user information in nats.url is redacted. Durations show as
// strings ("30s").
func (c Config) LogValue() slog.Value {
	return logGroup(reflect.ValueOf(c), "")
}

// logGroup returns the group of the struct v, whose keys start with prefix.
func logGroup(v reflect.Value, prefix string) slog.Value {
	t := v.Type()
	attrs := make([]slog.Attr, 0, t.NumField())
	for i := range t.NumField() {
		name := t.Field(i).Tag.Get("mapstructure")
		if t.Field(i).Type.Kind() == reflect.Struct {
			attrs = append(attrs, slog.Attr{Key: name, Value: logGroup(v.Field(i), prefix+name+".")})
			continue
		}
		if val, ok := shown(prefix+name, v.Field(i)); ok {
			attrs = append(attrs, slog.Any(name, val))
		}
	}
	return slog.GroupValue(attrs...)
}

// Redacted returns the settings as nested maps keyed like the
// configuration file (m["queue"].(map[string]any)["batch_size"]), with
// secrets and nats.url redacted as in LogValue and durations as strings,
// for printing the effective configuration.
func (c Config) Redacted() map[string]any {
	return redactedMap(reflect.ValueOf(c), "")
}

// redactedMap returns the map of the struct v, whose keys start with
// prefix.
func redactedMap(v reflect.Value, prefix string) map[string]any {
	t := v.Type()
	m := make(map[string]any, t.NumField())
	for i := range t.NumField() {
		name := t.Field(i).Tag.Get("mapstructure")
		if t.Field(i).Type.Kind() == reflect.Struct {
			m[name] = redactedMap(v.Field(i), prefix+name+".")
			continue
		}
		if val, ok := shown(prefix+name, v.Field(i)); ok {
			m[name] = val
		}
	}
	return m
}

// shown returns what may be shown of the setting key with value v, and
// false for a secret that is not set.
func shown(key string, v reflect.Value) (any, bool) {
	switch x := v.Interface().(type) {
	case Secret:
		return x.String(), x != ""
	case time.Duration:
		return x.String(), true
	case []time.Duration:
		s := make([]string, len(x))
		for i, d := range x {
			s[i] = d.String()
		}
		return s, true
	case []string:
		return append([]string{}, x...), true
	case string:
		if key == "nats.url" {
			return redactURLs(x), true
		}
		return x, true
	default:
		return x, true
	}
}
