package solver

// Lookup tables for the band representation, computed once at start-up.
//
// A band is three rows of the grid (rows 1-3, 4-6 or 7-9). For one digit, its
// candidates in one band are a 27-bit word: bit r*9+c is row r (0-2) of the
// band, column c (0-8). A "minirow" is the three cells a row shares with a
// box; a band has nine of them, and bit r*3+k of a shrunk word says whether
// row r has a candidate in box k.

var (
	// minirowsOf maps the nine bits of one row to the three bits saying which
	// of its minirows (boxes) hold a candidate.
	minirowsOf [512]uint32

	// bandMask maps a shrunk band (nine minirow bits) to the cells that can
	// still hold the digit. In a band a digit sits once in each row and once
	// in each box, so the minirows it uses form a 3x3 permutation: a minirow
	// survives only if some permutation made of occupied minirows uses it.
	// This one lookup applies locked candidates both ways (pointing and
	// claiming) and hidden singles in boxes; 0 means no permutation is left,
	// a contradiction.
	bandMask [512]uint32

	// stackKeep is bandMask turned sideways, for the three boxes of a stack:
	// bit b*3+j of its index says whether band b holds a candidate in the
	// stack's column j, and the entry keeps the bits that some permutation
	// (one column per band, one band per column) made of them uses.
	stackKeep [512]uint32

	// permCount[s] is the number of permutations (one bit per row and per
	// column of the 3x3 bit matrix s) made of bits of s: the configurations
	// a digit has left in a band (s a shrunk word) or in a stack.
	permCount [512]uint8

	// minirowCells maps nine minirow bits to the band cells they cover.
	minirowCells [512]uint32

	// perms lists the six 3x3 permutation matrices as nine-bit masks.
	perms9 [6]uint32

	// keepOnPlace[p] is the band mask that keeps cell p and clears every other
	// cell of p's row and box: placing a digit at p.
	keepOnPlace [27]uint32

	// cellBand and cellBit locate each of the 81 cells in the band words.
	cellBand [81]uint8
	cellBit  [81]uint32
)

// colsMask turns a set of columns (nine bits) into the band cells in them.
func colsMask(cols uint32) uint32 { return cols * 0x40201 }

// columnsOf folds a band word to the set of columns it touches.
func columnsOf(x uint32) uint32 { return (x | x>>9 | x>>18) & 0x1ff }

// shrink folds a band word to its nine minirow bits.
func shrink(x uint32) uint32 {
	return minirowsOf[x&0x1ff] | minirowsOf[(x>>9)&0x1ff]<<3 | minirowsOf[(x>>18)&0x1ff]<<6
}

func init() {
	for r := uint32(0); r < 512; r++ {
		var m uint32
		for k := uint32(0); k < 3; k++ {
			if r&(7<<(3*k)) != 0 {
				m |= 1 << k
			}
		}
		minirowsOf[r] = m
	}
	perms := [6][3]uint32{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for s := uint32(0); s < 512; s++ {
		var keep uint32 // minirow bits used by some permutation within s
		for _, p := range perms {
			m := uint32(1)<<p[0] | uint32(1)<<(3+p[1]) | uint32(1)<<(6+p[2])
			if s&m == m {
				keep |= m
				permCount[s]++
			}
		}
		stackKeep[s] = keep
		var cells uint32
		for i := uint32(0); i < 9; i++ {
			if keep&(1<<i) != 0 {
				r, k := i/3, i%3
				cells |= 7 << (r*9 + k*3)
			}
		}
		bandMask[s] = cells
		var all uint32
		for i := uint32(0); i < 9; i++ {
			if s&(1<<i) != 0 {
				all |= 7 << (i/3*9 + i%3*3)
			}
		}
		minirowCells[s] = all
	}
	for i, p := range perms {
		m := uint32(1)<<p[0] | uint32(1)<<(3+p[1]) | uint32(1)<<(6+p[2])
		perms9[i] = m
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
