package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/sudoku-queue/sudoku-queue/client"
)

// puzzles are three lines of a job: two puzzles and a line that is not
// one.
var puzzles = []string{
	".................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7...",
	"4.....8.5.3..........7......2.....6.....8.4......1.......6.3.7.5..2.....1.4......",
	"not a puzzle",
}

// A whole job in one process: an embedded NATS server and a worker in
// the process, the results in input order. Against a deployment, leave
// Embedded and MemoryCache out: Dial then reads SUDOKU_NATS_URL and the
// other SUDOKU_* settings, or Options.ConfigFile.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Embedded: true, MemoryCache: true, NoEnv: true})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	sub, err := c.SubmitPuzzles(ctx, puzzles, client.SubmitOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for r, err := range c.Results(ctx, sub.ID) {
		if err != nil {
			log.Fatal(err)
		}
		if r.Status == client.Invalid {
			fmt.Printf("line %d: %s\n", r.Line, r.Error)
			continue
		}
		fmt.Printf("line %d: %s %s\n", r.Line, r.Status, r.Solution)
	}
	// Output:
	// line 1: unique 953168742862734951417952836746893125281645397395271468138529674574386219629417583
	// line 2: unique 417369825632158947958724316825437169791586432346912758289643571573291684164875293
	// line 3: solver: column 1: invalid character 'n' (U+006E) for cell r1c1 (want 1-9, or . or 0 for a blank)
}

// One puzzle, ahead of every bulk job: from the cache if it holds it,
// else from a worker.
func ExampleClient_Solve() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Embedded: true, MemoryCache: true, NoEnv: true})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	r, err := c.Solve(ctx, puzzles[0], client.SolveOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Status, r.Solution)
	// Output:
	// unique 953168742862734951417952836746893125281645397395271468138529674574386219629417583
}

// Jobs of an owner: submit from a reader, wait for the end, look at the
// counts, then remove the job.
func ExampleClient_Wait() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Embedded: true, MemoryCache: true, NoEnv: true,
		Settings: map[string]string{"job.owner": "alice"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	sub, err := c.Submit(ctx, strings.NewReader(strings.Join(puzzles, "\n")), client.SubmitOptions{Priority: client.High})
	if err != nil {
		log.Fatal(err)
	}
	st, err := c.Wait(ctx, sub.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.State, st.Lines, "lines:", st.Counts)
	if err := c.Remove(ctx, sub.ID); err != nil {
		log.Fatal(err)
	}
	_, err = c.Status(ctx, sub.ID)
	fmt.Println(err != nil && errors.Is(err, client.ErrNotFound))
	// Output:
	// finished 3 lines: invalid=1 unique=2
	// true
}
