package docs

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/internal/config"
)

// configDoc is the page that gives every setting with its default.
const configDoc = "docs/configuration.md"

// settingRow is a row of configDoc's tables: | `key` | `default` | ...
var settingRow = regexp.MustCompile("(?m)^\\| `([a-z_.]+)` \\| `([^`]*)` \\|")

// defaults returns every key of config.Config with its default value,
// from the struct's mapstructure tags, as internal/config derives them.
func defaults() map[string]reflect.Value {
	out := map[string]reflect.Value{}
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		for i := range v.NumField() {
			key := prefix + v.Type().Field(i).Tag.Get("mapstructure")
			if f := v.Field(i); f.Kind() == reflect.Struct {
				walk(f, key+".")
			} else {
				out[key] = f
			}
		}
	}
	walk(reflect.ValueOf(config.Default()).Elem(), "")
	return out
}

// sameDefault reports whether doc, a default as the page writes it,
// is the value v.
func sameDefault(doc string, v reflect.Value) error {
	durations := func(s []string) ([]time.Duration, error) {
		var ds []time.Duration
		for _, x := range s {
			d, err := time.ParseDuration(x)
			if err != nil {
				return nil, err
			}
			ds = append(ds, d)
		}
		return ds, nil
	}
	var got any
	var err error
	switch x := v.Interface().(type) {
	case time.Duration:
		got, err = time.ParseDuration(doc)
	case []time.Duration:
		var s []string
		if err = json.Unmarshal([]byte(doc), &s); err == nil {
			got, err = durations(s)
		}
	case []string:
		var s []string
		err = json.Unmarshal([]byte(doc), &s)
		got = s
	case bool:
		got, err = strconv.ParseBool(doc)
	case int:
		got, err = strconv.Atoi(doc)
	case int64:
		got, err = strconv.ParseInt(doc, 10, 64)
	default:
		if v.Kind() != reflect.String {
			return fmt.Errorf("a key of type %T: teach the test to read it", x)
		}
		if doc == `""` {
			doc = ""
		}
		got = reflect.ValueOf(doc).Convert(v.Type()).Interface()
	}
	if err != nil {
		return fmt.Errorf("%q: %w", doc, err)
	}
	if !reflect.DeepEqual(got, v.Interface()) {
		return fmt.Errorf("the page says %s, the code %#v", doc, v.Interface())
	}
	return nil
}

// TestConfigurationDoc checks that docs/configuration.md has a row for
// every key of the configuration, with the code's default, and no row for
// a key that does not exist.
func TestConfigurationDoc(t *testing.T) {
	want := defaults()
	rows := settingRow.FindAllStringSubmatch(readDoc(t, configDoc), -1)
	seen := map[string]bool{}
	for _, r := range rows {
		key, doc := r[1], r[2]
		v, ok := want[key]
		switch {
		case !ok:
			t.Errorf("%s: %s is not a key of internal/config", configDoc, key)
			continue
		case seen[key]:
			t.Errorf("%s: %s has two rows", configDoc, key)
		}
		seen[key] = true
		if err := sameDefault(doc, v); err != nil {
			t.Errorf("%s: the default of %s: %v", configDoc, key, err)
		}
	}
	for key := range want {
		if !seen[key] {
			t.Errorf("%s has no row for %s", configDoc, key)
		}
	}
}

// TestSameDefault shows that a default the page gets wrong is caught.
func TestSameDefault(t *testing.T) {
	for _, c := range []struct {
		doc  string
		v    any
		same bool
	}{
		{"4096", 4096, true},
		{"256", 4096, false},
		{"168h0m0s", 168 * time.Hour, true},
		{"168h", 168 * time.Hour, true},
		{"1h", 168 * time.Hour, false},
		{`["1s", "5s"]`, []time.Duration{time.Second, 5 * time.Second}, true},
		{`["1s"]`, []time.Duration{time.Second, 5 * time.Second}, false},
		{`["127.0.0.1:6379"]`, []string{"127.0.0.1:6379"}, true},
		{`""`, "", true},
		{"text", "json", false},
		{"false", false, true},
		{"true", false, false},
		{"1048576", int64(1048576), true},
	} {
		err := sameDefault(c.doc, reflect.ValueOf(c.v))
		if (err == nil) != c.same {
			t.Errorf("sameDefault(%s, %#v) = %v, want same=%v", c.doc, c.v, err, c.same)
		}
	}
}
