package cache

import (
	"testing"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// TestHotCache checks the hot cache's generations: what is used stays, gave_up
// is not kept, and a nil cache never hits.
func TestHotCache(t *testing.T) {
	c := NewHot(4)
	r := func(k string, st result.Status) result.Result { return result.Result{Key: k, Status: st, Line: 3} }
	c.Add("a", r("a", result.StatusUnique))
	c.Add("g", r("g", result.StatusGaveUp))
	if _, ok := c.Get("g"); ok {
		t.Errorf("a gave_up result was kept")
	}
	if got, ok := c.Get("a"); !ok || got.Line != 0 || got.Status != result.StatusUnique {
		t.Errorf("get(a) = %+v, %v", got, ok)
	}
	c.Add("b", r("b", result.StatusNone))     // cur: a b
	c.Add("c", r("c", result.StatusMultiple)) // old: a b; cur: c
	if _, ok := c.Get("a"); !ok {             // a moves to cur: c a
		t.Errorf("a lost after one turn")
	}
	c.Add("d", r("d", result.StatusUnique)) // old: c a; cur: d
	c.Add("e", r("e", result.StatusUnique)) // cur: d e
	c.Add("f", r("f", result.StatusUnique)) // old: d e; cur: f
	for k, want := range map[string]bool{"a": false, "b": false, "c": false, "d": true, "e": true, "f": true} {
		if _, ok := c.Get(k); ok != want {
			t.Errorf("get(%s): %v, want %v", k, ok, want)
		}
	}
	var off *Hot = NewHot(-1)
	off.Add("a", r("a", result.StatusUnique))
	if _, ok := off.Get("a"); ok {
		t.Errorf("a disabled cache hit")
	}
}
