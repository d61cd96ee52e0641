// Package solver parses, validates and solves 9x9 Sudoku puzzles.
//
// It is a pure library: standard library only, no I/O, no logging, no
// global state. Every function is safe for concurrent use.
//
// The solver is a recursive backtracker over bitset candidates (one 27-bit
// word per digit and band), with constraint propagation between guesses
// (naked and hidden singles, locked candidates, and the triad rules of
// tdoku: a minirow or minicolumn holds exactly three digits) and branching
// on the ways a digit can still sit in a band or stack, as tdoku does. See
// solve.go for the details.
package solver

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
)

// Grid is a Sudoku grid: 81 cells in row-major order (cell 0 is r1c1,
// cell 80 is r9c9). A cell holds 0 for a blank and 1-9 for a digit.
//
// A Grid made by Parse is valid: no digit repeats in a row, column or box.
// A Grid made by hand may not be; Solve validates it first.
type Grid [81]uint8

// String returns the canonical 81-character form of the grid: row by row,
// '1'-'9' for a digit and '.' for a blank.
func (g *Grid) String() string {
	c := g.Canonical()
	return string(c[:])
}

// Canonical returns String's bytes, without allocating: '.' for a 0 and
// '0'+v (modulo 256) for any other cell v.
func (g *Grid) Canonical() [81]byte {
	// Eight cells at a time, as Digits, and then '.' ('0'-2) for every
	// byte that was 0: the top bit of each zero byte, shifted, is a 2.
	var b [81]byte
	for w := 0; w < 80; w += 8 {
		x := binary.LittleEndian.Uint64(g[w:])
		zero := nonzero(x) ^ highBits
		binary.LittleEndian.PutUint64(b[w:], digits8(x)-(zero>>6))
	}
	b[80] = '0' + g[80]
	if g[80] == 0 {
		b[80] = '.'
	}
	return b
}

// Digits returns the grid as 81 digits, '0' for a blank; for a solved grid
// this is the usual one-line form of a solution.
func (g *Grid) Digits() string {
	var b [81]byte
	for w := 0; w < 80; w += 8 {
		binary.LittleEndian.PutUint64(b[w:], digits8(binary.LittleEndian.Uint64(g[w:])))
	}
	b[80] = '0' + g[80]
	return string(b[:])
}

// Eight cells in a word (little-endian), worked on at once: the bit
// tricks below keep every byte's arithmetic within the byte.
const (
	low7Bits = 0x7f7f7f7f7f7f7f7f // the low 7 bits of each byte
	highBits = 0x8080808080808080 // the top bit of each byte
)

// nonzero returns the top bit of each byte of x that is not 0. Adding 0x7f
// to a byte's low 7 bits sets its top bit unless they are all 0, without a
// carry into the next byte; or'ed with the byte, the top bit is set
// exactly in the bytes that are not 0.
func nonzero(x uint64) uint64 { return (((x & low7Bits) + low7Bits) | x) & highBits }

// digits8 returns '0'+v (modulo 256) for each byte v of x: '0' is added to
// each byte's low 7 bits (a carry stays within the byte) and its top bit
// put back by xor.
func digits8(x uint64) uint64 { return ((x & low7Bits) + 0x3030303030303030) ^ (x & highBits) }

// Givens returns the number of filled cells.
func (g *Grid) Givens() int {
	f := g.filled()
	return bits.OnesCount64(f[0]) + bits.OnesCount64(f[1])
}

// Key returns the grid's cache key: the lower-case hex SHA-256 of its
// canonical form (String). Every input format of the same puzzle, and '0'
// or '.' for blanks, gives the same key. It is 64 characters long.
func (g *Grid) Key() string {
	c := g.Canonical()
	sum := sha256.Sum256(c[:])
	return hex.EncodeToString(sum[:])
}

// IsKey reports whether s has the form of a key returned by Key.
func IsKey(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// CellName returns the r1c1 name of cell i (0-80), e.g. "r3c7".
func CellName(i int) string {
	return "r" + string(rune('1'+i/9)) + "c" + string(rune('1'+i%9))
}
