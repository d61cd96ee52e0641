package cache

import (
	"sync"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// Hot keeps the results a process has read or written lately, in front
// of the cache, for the lookups of one puzzle (POST /v1/solve, GET
// /v1/solutions of sudoku serve): a hit costs no round trip to Redis, which is most of the
// cost of such a lookup.
//
// It is safe because a puzzle's answer never changes: the key is the hash
// of the puzzle, and unique, multiple, none and invalid are facts about
// it. A gave_up result is not kept, since a later search with a larger
// budget may decide. An entry may outlive its Redis copy (TTL, eviction,
// a flush): the answer is still right.
//
// It holds at most size entries in two generations: new entries go to the
// current one; when it is full it becomes the old one and the previous old
// one is dropped; a hit in the old generation moves the entry to the
// current one. So what is used stays, at the cost of a map per
// generation. It is safe for concurrent use.
type Hot struct {
	mu       sync.Mutex
	half     int
	cur, old map[string]result.Result
}

// NewHot returns a cache of at most size entries; nil (no cache) when
// size < 2. A nil *Hot is valid and never hits.
func NewHot(size int) *Hot {
	if size < 2 {
		return nil
	}
	return &Hot{half: size / 2, cur: make(map[string]result.Result)}
}

// Get returns the result of key, if kept.
func (c *Hot) Get(key string) (result.Result, bool) {
	if c == nil {
		return result.Result{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.cur[key]; ok {
		return r, true
	}
	r, ok := c.old[key]
	if ok {
		delete(c.old, key)
		c.addLocked(key, r)
	}
	return r, ok
}

// Add keeps r under key, unless it is not final (gave_up).
func (c *Hot) Add(key string, r result.Result) {
	if c == nil || key == "" || r.Status == result.StatusGaveUp {
		return
	}
	r.Line = 0
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(key, r)
}

func (c *Hot) addLocked(key string, r result.Result) {
	if len(c.cur) >= c.half {
		c.old, c.cur = c.cur, make(map[string]result.Result, c.half)
	}
	c.cur[key] = r
}
