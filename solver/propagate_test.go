package solver

import (
	"testing"
)

// TestPropagateFixpoint checks the bookkeeping that lets propagation look
// only at what changed (state.dirty, prev, moved, tmoved, nmoved): when
// propagate returns, running it again with every word marked as changed
// must find nothing more to do, and the triad marks kept per digit must be
// those of the words. It follows one path of the search tree of
// each fixture puzzle down to a solution or a contradiction, checking at
// every level, and compares every contradiction it finds with what a full
// re-run finds.
func TestPropagateFixpoint(t *testing.T) {
	levels, dead := 0, 0
	for _, fx := range fixtures {
		for pi, g := range fixture(t, fx.file) {
			var s state
			s.init(&g, g.filled())
			for depth := 0; ; depth++ {
				before := s
				ok := s.propagate()
				// The same position with everything to look at again.
				full := before
				full.dirty, full.moved, full.tmoved, full.nmoved = 1<<27-1, 1<<27-1, 1<<27-1, 1<<27-1
				full.prev = [27]uint32{}
				okFull := full.propagate()
				if ok != okFull {
					t.Fatalf("%s:%d level %d: propagate says %v, a full re-run %v", fx.file, pi+1, depth, ok, okFull)
				}
				if !ok {
					dead++
					break
				}
				levels++
				again := s
				again.dirty, again.moved, again.tmoved, again.nmoved = 1<<27-1, 1<<27-1, 1<<27-1, 1<<27-1
				again.prev = [27]uint32{}
				if !again.propagate() || again.cand != s.cand || again.unsolved != s.unsolved {
					t.Fatalf("%s:%d level %d: propagation stopped before its fixpoint:\n%v\nthen\n%v", fx.file, pi+1, depth, s.cand, again.cand)
				}
				if s.unsolved[0]|s.unsolved[1]|s.unsolved[2] == 0 {
					break
				}
				// What triads keeps per digit must be up to date too.
				if again.poss != s.poss || again.cert != s.cert || again.confs != s.confs {
					t.Fatalf("%s:%d level %d: the triad marks kept are out of date", fx.file, pi+1, depth)
				}
				// Go down: the branch the search takes last (the state it
				// reuses), or the first, in turn.
				st, u, d, pat := s.branchChute()
				var first, last uint32
				for _, m := range perms {
					if pat&uint32(m) == uint32(m) {
						if first == 0 {
							first = uint32(m)
						}
						last = uint32(m)
					}
				}
				m := first
				if (pi+depth)%2 == 1 {
					m = last
				}
				s.keepConfig(st, u, d, m)
			}
		}
	}
	t.Logf("%d positions checked, %d paths ended in a contradiction", levels, dead)
	if levels < 1000 || dead < 20 {
		t.Errorf("only %d positions and %d contradictions: the test needs more", levels, dead)
	}
}

// TestInitPlacesGivens checks that init, which sets up all the givens at
// once, gives the words and unsolved cells that placing the givens one by
// one does.
func TestInitPlacesGivens(t *testing.T) {
	for _, fx := range fixtures {
		for pi, g := range fixture(t, fx.file) {
			var got, want state
			got.init(&g, g.filled())
			var empty Grid
			want.init(&empty, empty.filled())
			for i, v := range g {
				if v != 0 {
					want.place(int(v-1), int(cellBand[i]), uint32(i%27))
					want.unsolved[cellBand[i]] &^= cellBit[i]
				}
			}
			if got.cand != want.cand || got.unsolved != want.unsolved {
				t.Fatalf("%s:%d: init gives\n%v %v\nplacing the givens gives\n%v %v", fx.file, pi+1, got.cand, got.unsolved, want.cand, want.unsolved)
			}
		}
	}
}
