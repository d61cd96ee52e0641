package job

import (
	"bufio"
	"os"
	"testing"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

// benchBatch returns a work batch of the 17-clue fixture's puzzles and the
// results batch that answers it.
func benchBatch(b *testing.B, n int) (work, results Batch) {
	f, err := os.Open("../../solver/testdata/17_clue_300.txt")
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	work = Batch{Job: NewID("alice"), Index: 3, First: 3 * uint64(n)}
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(work.Items) < n {
		g, err := solver.Parse(sc.Text())
		if err != nil {
			b.Fatal(err)
		}
		work.Items = append(work.Items, Item{Line: len(work.Items) + 1, Kind: Solve, Grid: g})
	}
	return work, answered(b, work)
}

// perItem reports ns per item.
func perItem(b *testing.B, n int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/item")
}

func BenchmarkAppendWork(b *testing.B) {
	w, _ := benchBatch(b, 256)
	buf := make([]byte, 0, 64<<10)
	for b.Loop() {
		buf = w.AppendWork(buf[:0])
	}
	perItem(b, len(w.Items))
}

func BenchmarkDecodeWork(b *testing.B) {
	w, _ := benchBatch(b, 256)
	data := w.AppendWork(nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeWork(data); err != nil {
			b.Fatal(err)
		}
	}
	perItem(b, len(w.Items))
}

func BenchmarkAppendResults(b *testing.B) {
	_, r := benchBatch(b, 256)
	buf := make([]byte, 0, 64<<10)
	for b.Loop() {
		buf = r.AppendResults(buf[:0])
	}
	perItem(b, len(r.Items))
}

func BenchmarkDecodeResults(b *testing.B) {
	_, r := benchBatch(b, 256)
	data := r.AppendResults(nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeResults(data); err != nil {
			b.Fatal(err)
		}
	}
	perItem(b, len(r.Items))
}

func BenchmarkDigest(b *testing.B) {
	w, _ := benchBatch(b, 256)
	for b.Loop() {
		w.ComputeDigest()
	}
	perItem(b, len(w.Items))
}

func BenchmarkCheck(b *testing.B) {
	_, r := benchBatch(b, 256)
	for b.Loop() {
		for i := range r.Items {
			if err := r.Items[i].Outcome.Check(); err != nil {
				b.Fatal(err)
			}
		}
	}
	perItem(b, len(r.Items))
}

func BenchmarkKeyOf(b *testing.B) {
	w, _ := benchBatch(b, 256)
	for b.Loop() {
		for i := range w.Items {
			KeyOf(&w.Items[i].Grid)
		}
	}
	perItem(b, len(w.Items))
}

func BenchmarkBrief(b *testing.B) {
	_, r := benchBatch(b, 256)
	b.ReportAllocs()
	for b.Loop() {
		for i := range r.Items {
			_ = r.Items[i].Outcome.Brief(i)
		}
	}
	perItem(b, len(r.Items))
}
