package solver

// Parse reads one puzzle. STUB until the parser lands.
func Parse(s string) (Grid, error) {
	var g Grid
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '1' && c <= '9':
			if n < 81 {
				g[n] = c - '0'
			}
			n++
		case c == '.' || c == '0':
			n++
		}
	}
	if n != 81 {
		return g, &ParseError{Kind: CellCount, Cells: n}
	}
	return g, g.Validate()
}
