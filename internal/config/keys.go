package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

// The keys are derived from Config's mapstructure tags rather than listed
// a second time: adding a field to Config adds its key, its default (from
// Default), its environment variable, its flag name and its place in the
// log line. The tests check that configs/sudoku.yaml and
// docs/configuration.md document it, and TestEveryKey sets it from each
// source.

// field is one key of the configuration: a leaf of Config.
type field struct {
	key    string       // e.g. "queue.ack_wait"
	index  []int        // the field's index path in Config
	typ    reflect.Type // the field's type, one of those decodeHook handles
	secret bool         // of type Secret
}

var (
	secretType   = reflect.TypeFor[Secret]()
	durationType = reflect.TypeFor[time.Duration]()
)

// fields are all the keys in Config's field order; sections are the keys
// of the nested structs ("nats", "nats.tls", ...); byKey indexes fields.
var fields, sections, byKey = collectFields()

func collectFields() ([]field, map[string]bool, map[string]*field) {
	var fs []field
	secs := map[string]bool{}
	var walk func(t reflect.Type, prefix string, index []int)
	walk = func(t reflect.Type, prefix string, index []int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			name := sf.Tag.Get("mapstructure")
			if name == "" || strings.ContainsAny(name, ".,") {
				panic(fmt.Sprintf("config: field %s needs a plain mapstructure tag", sf.Name))
			}
			key := prefix + name
			idx := append(append([]int(nil), index...), i)
			if sf.Type.Kind() == reflect.Struct {
				secs[key] = true
				walk(sf.Type, key+".", idx)
				continue
			}
			if !supported(sf.Type) {
				panic(fmt.Sprintf("config: key %s: unsupported type %s", key, sf.Type))
			}
			fs = append(fs, field{key: key, index: idx, typ: sf.Type, secret: sf.Type == secretType})
		}
	}
	walk(reflect.TypeFor[Config](), "", nil)
	idx := make(map[string]*field, len(fs))
	for i := range fs {
		idx[fs[i].key] = &fs[i]
	}
	for _, f := range fs {
		if f.secret && idx[f.key+"_file"] == nil {
			panic(fmt.Sprintf("config: secret key %s has no %s_file", f.key, f.key))
		}
	}
	return fs, secs, idx
}

// supported reports whether decodeHook handles the type t (and
// AddKeyFlags, and the tests' samples).
func supported(t reflect.Type) bool {
	switch {
	case t == durationType, t == reflect.TypeFor[[]time.Duration]():
		return true
	case t.Kind() == reflect.Slice:
		return t.Elem().Kind() == reflect.String
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64:
		return true
	}
	return false
}

// envName returns the environment variable of key:
// "queue.batch_size" -> "SUDOKU_QUEUE_BATCH_SIZE".
func envName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// flagName returns the flag name of key:
// "queue.batch_size" -> "queue-batch-size".
func flagName(key string) string {
	return strings.NewReplacer(".", "-", "_", "-").Replace(key)
}

// FlagName returns the name of the flag of key, as AddKeyFlags defines
// it and Load reads it: "queue.batch_size" -> "queue-batch-size".
func FlagName(key string) string { return flagName(key) }

// KeyOfFlag returns the key whose flag is named name ("nats-url" ->
// "nats.url"), or false when no key has a flag of that name.
func KeyOfFlag(name string) (string, bool) {
	for i := range fields {
		if flagName(fields[i].key) == name {
			return fields[i].key, true
		}
	}
	return "", false
}

// get returns the value of f in c.
func (f *field) get(c *Config) reflect.Value {
	return reflect.ValueOf(c).Elem().FieldByIndex(f.index)
}
