package solver

// Lookup tables for the band representation, computed once at start-up.
//
// A band is three rows of the grid (rows 1-3, 4-6 or 7-9). For one digit, its
// candidates in one band are a 27-bit word: bit r*9+c is row r (0-2) of the
// band, column c (0-8). A "minirow" is the three cells a row shares with a
// box; a band has nine of them. Shrinking a band word gives nine bits, one
// per minirow that holds a candidate: bit k*3+r for box k, row r (see
// shrink).
//
// Several rules look at a 3x3 matrix of bits, nine bits with bit i*3+j in
// line i and place j, where a digit must take exactly one place in each line
// and one line in each place: the minirows of a digit in a band (lines are
// boxes, places are rows), or its minicolumns in a stack (lines are bands,
// places are the stack's columns). The six permutation matrices are the
// configurations the digit can take there.

var (
	// permKeep maps a 3x3 matrix to the bits that some permutation matrix
	// made of its bits uses; 0 when there is none (a contradiction). In a
	// band this is locked candidates both ways (pointing and claiming) and
	// hidden singles in boxes, in one lookup.
	permKeep [512]uint16

	// permCount maps a 3x3 matrix to the number of permutation matrices made
	// of its bits: the configurations a digit has left in a band or stack.
	permCount [512]uint8

	// perms lists the six permutation matrices.
	perms [6]uint16

	// permsIn maps a 3x3 matrix to the permutation matrices made of its
	// bits: bit k for perms[k].
	permsIn [512]uint8

	// minirowCells maps shrunk minirow bits to the band cells they cover.
	minirowCells [512]uint32

	// bandMask maps a shrunk band word to the cells of minirowCells[permKeep]:
	// the cells that can still hold the digit.
	bandMask [512]uint32

	// keepOnPlace[p] is the band mask that keeps cell p and clears every other
	// cell of p's row and box: placing a digit at p.
	keepOnPlace [27]uint32

	// bandRule maps a shrunk band word to bandMask (low 32 bits) and, in
	// the high 32 bits, the cells of the minirows that are the only ones
	// left in their row.
	bandRule [512]uint64

	// spread8 maps eight bits to eight bytes, bit i to the low bit of byte
	// i (little-endian).
	spread8 [256]uint64

	// cellBand and cellBit locate each of the 81 cells in the band words.
	cellBand [81]uint8
	cellBit  [81]uint32
)

// colsMask turns a set of columns (nine bits) into the band cells in them.
func colsMask(cols uint32) uint32 { return cols * 0x40201 }

// columnsOf folds a band word to the set of columns it touches.
func columnsOf(x uint32) uint32 { return (x | x>>9 | x>>18) & 0x1ff }

// minirowTops has the first cell of each minirow of a band word.
const minirowTops = 0x1249249

// minirowsAt marks the minirows of band word x that hold a candidate, with
// one bit at the first cell of each (bit 9r+3k for row r, box k).
func minirowsAt(x uint32) uint32 { return (x | x>>1 | x>>2) & minirowTops }

// fold packs minirow marks (as minirowsAt sets them) into nine bits: bit
// 9r+3k moves to 3k+r, since row 1 is shifted down by 8 and row 2 by 16.
func fold(y uint32) uint32 { return (y | y>>8 | y>>16) & 0x1ff }

// shrink folds a band word to its nine minirow bits, bit 3k+r for box k,
// row r.
func shrink(x uint32) uint32 { return fold(minirowsAt(x)) }

func init() {
	orders := [6][3]uint32{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for i, p := range orders {
		perms[i] = uint16(1<<p[0] | 1<<(3+p[1]) | 1<<(6+p[2]))
	}
	for s := uint32(0); s < 512; s++ {
		var keep uint16
		for k, m := range perms {
			if uint16(s)&m == m {
				keep |= m
				permCount[s]++
				permsIn[s] |= 1 << k
			}
		}
		permKeep[s] = keep
		var cells uint32
		for i := uint32(0); i < 9; i++ {
			if s&(1<<i) != 0 {
				k, r := i/3, i%3
				cells |= 7 << (r*9 + k*3)
			}
		}
		minirowCells[s] = cells
	}
	for s := range bandMask {
		bandMask[s] = minirowCells[permKeep[s]]
	}
	for sh := range bandRule {
		keep := uint32(permKeep[sh])
		var only uint32
		for r := uint32(0); r < 3; r++ {
			var in []uint32
			for k := uint32(0); k < 3; k++ {
				if keep&(1<<(3*k+r)) != 0 {
					in = append(in, k)
				}
			}
			if len(in) == 1 {
				only |= 7 << (9*r + 3*in[0])
			}
		}
		bandRule[sh] = uint64(bandMask[sh]) | uint64(only)<<32
	}
	for t := range spread8 {
		for i := 0; i < 8; i++ {
			if t&(1<<i) != 0 {
				spread8[t] |= 1 << (8 * i)
			}
		}
	}
	for p := 0; p < 27; p++ {
		r, c := p/9, p%9
		var m uint32 = 0x7ffffff
		m &^= 0x1ff << (9 * r)           // the row
		m &^= colsMask(7 << (c / 3 * 3)) // the box
		keepOnPlace[p] = m | 1<<p
	}
	for i := 0; i < 81; i++ {
		cellBand[i] = uint8(i / 27)
		cellBit[i] = 1 << (i % 27)
	}
}
