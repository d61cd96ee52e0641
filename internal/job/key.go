package job

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

// Key is a puzzle's key: the SHA-256 of its canonical form
// (solver.Grid.String). Its hex form (String) is solver.Grid.Key, the key
// users see and the cache's.
type Key [sha256.Size]byte

// KeyOf returns the key of g without allocating.
func KeyOf(g *solver.Grid) Key {
	c := g.Canonical()
	return sha256.Sum256(c[:])
}

// String returns the key in hex, as solver.Grid.Key does.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// AppendHex appends the key in hex to dst.
func (k Key) AppendHex(dst []byte) []byte { return hex.AppendEncode(dst, k[:]) }

// ParseKey parses the hex form of a key.
func ParseKey(s string) (Key, error) {
	var k Key
	if !solver.IsKey(s) {
		return k, fmt.Errorf("%q is not a key: want 64 lower-case hex digits", s)
	}
	_, err := hex.Decode(k[:], []byte(s))
	return k, err
}
