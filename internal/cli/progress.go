package cli

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress shows a progress bar of puzzles done on a terminal: done/total,
// rate and time left when the total is known, a spinner with the count and
// rate otherwise. A nil *progress, or one without a bar, shows nothing, so
// callers need not check whether there is a terminal. Its methods are safe
// for concurrent use.
type progress struct {
	bar *progressbar.ProgressBar
}

// newProgress returns a progress bar on w when w is a terminal, else nil.
// total is the number of puzzles expected, or -1 when unknown.
func newProgress(w io.Writer, description string, total int) *progress {
	if !isTerminal(w) {
		return nil
	}
	return newBar(w, description, total)
}

// newBar returns a progress bar on w, a terminal or not.
func newBar(w io.Writer, description string, total int) *progress {
	if total == 0 {
		total = -1
	}
	bar := progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(description),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("puzzles"),
		progressbar.OptionSetPredictTime(total > 0),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true),
	)
	return &progress{bar: bar}
}

// Set shows done puzzles done.
func (p *progress) Set(done int) {
	if p == nil || p.bar == nil {
		return
	}
	// The only errors say the count went past a total counted beforehand
	// (the file grew); the bar is a hint, not worth failing for.
	_ = p.bar.Set(done)
}

// Close removes the bar from the terminal, so that the lines printed next
// start on a clean line.
func (p *progress) Close() {
	if p == nil || p.bar == nil {
		return
	}
	_ = p.bar.Finish()
	_ = p.bar.Clear()
}

// Clear removes the bar from the terminal until it is drawn again, so
// that lines can be printed above it.
func (p *progress) Clear() {
	if p == nil || p.bar == nil {
		return
	}
	_ = p.bar.Clear()
}

// SetTotal sets the number of puzzles expected, once it is known.
func (p *progress) SetTotal(total int) {
	if p == nil || p.bar == nil || total <= 0 {
		return
	}
	p.bar.ChangeMax(total)
}

// Describe changes the text before the bar: what is being done, or what
// is being waited for. A bar started without a total (newProgress with -1)
// draws itself again every spinner tick, so the text shows even while
// nothing progresses.
func (p *progress) Describe(what string) {
	if p == nil || p.bar == nil {
		return
	}
	p.bar.Describe(what)
}
