package result

import (
	"errors"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

// ParseDetails returns the facts of err, a puzzle that does not parse (a
// *solver.ParseError), as the members of the details of an API error
// (docs/http-api.md): "reason" (bad_char, cell_count, conflict,
// bad_digit, too_long) and the line, column, cells and digits it names.
// It returns nil for another error.
func ParseDetails(err error) map[string]any {
	var pe *solver.ParseError
	if !errors.As(err, &pe) {
		return nil
	}
	d := map[string]any{}
	switch pe.Kind {
	case solver.BadChar:
		d["reason"] = "bad_char"
		d["line"], d["column"], d["char"] = pe.Line, pe.Col, string(pe.Char)
		if pe.Cell >= 0 && pe.Cell < 81 {
			d["cell"] = solver.CellName(pe.Cell)
		}
	case solver.CellCount:
		d["reason"] = "cell_count"
		d["cells"] = pe.Cells
		if pe.Line > 0 {
			d["line"] = pe.Line
		}
	case solver.Conflict:
		d["reason"] = "conflict"
		d["digit"], d["unit"] = pe.Digit, pe.Unit.String()
		d["cell"], d["cell2"] = solver.CellName(pe.Cell), solver.CellName(pe.Cell2)
	case solver.BadDigit:
		d["reason"] = "bad_digit"
		d["cell"], d["digit"] = solver.CellName(pe.Cell), pe.Digit
	case solver.TooLong:
		d["reason"] = "too_long"
		d["bytes"], d["max_bytes"] = pe.Len, solver.MaxInputLen
	}
	return d
}
