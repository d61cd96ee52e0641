package solver_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

func ExampleParse() {
	g, err := solver.Parse("53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79\r\n")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(g.String())
	fmt.Println(g.Givens(), "givens")
	// Output:
	// 53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79
	// 30 givens
}

// Parse also reads a grid of 9 lines as Sudoku sites print it.
func ExampleParse_grid() {
	g, err := solver.Parse(`
5 3 0 | 0 7 0 | 0 0 0
6 0 0 | 1 9 5 | 0 0 0
0 9 8 | 0 0 0 | 0 6 0
------+-------+------
8 0 0 | 0 6 0 | 0 0 3
4 0 0 | 8 0 3 | 0 0 1
7 0 0 | 0 2 0 | 0 0 6
------+-------+------
0 6 0 | 0 0 0 | 2 8 0
0 0 0 | 4 1 9 | 0 0 5
0 0 0 | 0 8 0 | 0 7 9
`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(g.String())
	// Output:
	// 53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79
}

func ExampleSolve() {
	g, err := solver.Parse("53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79")
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := solver.Solve(context.Background(), &g, solver.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Status)
	fmt.Println(r.Solution.Digits())

	// With too few givens there is more than one solution.
	g[0], g[1] = 0, 0
	r, err = solver.Solve(context.Background(), &g, solver.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Status)
	// Output:
	// unique
	// 534678912672195348198342567859761423426853791713924856961537284287419635345286179
	// multiple
}

// A Solver reused on one goroutine solves without allocating.
func ExampleSolver() {
	var sv solver.Solver
	for _, line := range []string{
		"53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79",
		".................................................................................",
		"531.7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79",
	} {
		g, err := solver.Parse(line)
		if err != nil {
			fmt.Println(err)
			continue
		}
		r, err := sv.Solve(context.Background(), &g, solver.Options{})
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(r.Status)
	}
	// Output:
	// unique
	// multiple
	// none
}

// The key of a puzzle does not depend on the format it came in.
func ExampleGrid_Key() {
	a, _ := solver.Parse("53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79")
	b, _ := solver.Parse("530070000600195000098000060800060003400803001700020006060000280000419005000080079")
	fmt.Println(a.Key())
	fmt.Println(a.Key() == b.Key())
	// Output:
	// 8176897ed0375c3ade1ae9a35e2705465d8e45122b285737a84bef093ab1c0ca
	// true
}

func ExampleParseError() {
	for _, in := range []string{
		"53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..7",
		"53..7....6..1９5....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79",
		"53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..99",
	} {
		_, err := solver.Parse(in)
		var pe *solver.ParseError
		if errors.As(err, &pe) {
			switch pe.Kind {
			case solver.CellCount:
				fmt.Println("cells:", pe.Cells)
			case solver.BadChar:
				fmt.Printf("character %q at line %d column %d\n", pe.Char, pe.Line, pe.Col)
			case solver.Conflict:
				fmt.Println("repeated digit:", pe.Digit, "in a", pe.Unit)
			}
		}
		fmt.Println(err)
	}
	// Output:
	// cells: 80
	// solver: 80 cells, want 81
	// character '９' at line 1 column 14
	// solver: column 14: invalid character '９' (U+FF19) for cell r2c5 (want 1-9, or . or 0 for a blank)
	// repeated digit: 9 in a row
	// solver: digit 9 repeats in row 9: r9c8 and r9c9
}

func ExampleCellName() {
	fmt.Println(solver.CellName(0), solver.CellName(40), solver.CellName(80))
	// Output:
	// r1c1 r5c5 r9c9
}
