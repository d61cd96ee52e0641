package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sudoku-queue/sudoku-queue/client"
	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/roles"
	"github.com/sudoku-queue/sudoku-queue/internal/telemetry"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

// loadConfig loads the configuration for cmd (file, environment, flags)
// and makes its logger, on stderr. A bad configuration is a usage error.
func loadConfig(cmd *cobra.Command) (*config.Config, *slog.Logger, error) {
	cfg, err := config.Load(config.LoadOptions{Flags: cmd.Flags()})
	if err != nil {
		return nil, nil, &exitError{code: ExitUsage, err: configError(err)}
	}
	return cfg, slog.New(telemetry.NewLogHandler(cfg.Log.Handler(cmd.ErrOrStderr()))), nil
}

// configError words the problems config.Load found: each bad setting
// with its key, value and source, several one a line.
//
//	configuration: 2 problems:
//	  nats.urll (from sudoku.yaml): unknown key (did you mean nats.url?)
//	  queue.batch_size = "abc" (from sudoku.yaml): must be an integer
func configError(err error) error {
	list := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	}
	msgs := make([]string, len(list))
	settings := 0
	for i, e := range list {
		msgs[i] = e.Error()
		var ce *config.Error
		if errors.As(e, &ce) {
			msgs[i] = strings.TrimPrefix(msgs[i], "config: ")
			settings++
		}
	}
	switch {
	case len(msgs) > 1:
		return &messageError{fmt.Sprintf("configuration: %d problems:\n  %s", len(msgs), strings.Join(msgs, "\n  ")), err}
	case settings == 1:
		return &messageError{"configuration: " + msgs[0], err}
	}
	return err // the file itself: "config file sudoku.yaml: ..."
}

// openConn loads the configuration and connects to NATS and the store.
func openConn(cmd *cobra.Command, oo app.OpenOptions) (*config.Config, *slog.Logger, *app.Conn, error) {
	cfg, log, err := loadConfig(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	if stop, ok := cmd.Context().Value(refusalKey{}).(context.CancelCauseFunc); ok {
		oo.OnRefusal = func(pe *roles.PermissionError) { stop(pe) }
	}
	conn, err := app.Open(cmd.Context(), cfg, oo, log)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, log, conn, nil
}

// openClient loads the configuration for cmd and dials a client with it
// and opts (by default without the cache: for the commands that look at
// jobs). A refusal of NATS stops a one-shot command at once
// (stopOnRefusal).
func openClient(cmd *cobra.Command, opts ...client.Options) (*client.Client, error) {
	_, log, err := loadConfig(cmd)
	if err != nil {
		return nil, err
	}
	o := client.Options{NoCache: true}
	if len(opts) > 0 {
		o = opts[0]
	}
	opts = nil
	o.Flags, o.Logger = cmd.Flags(), log
	if stop, ok := cmd.Context().Value(refusalKey{}).(context.CancelCauseFunc); ok {
		o.OnRefusal = stop
	}
	return client.Dial(cmd.Context(), o)
}

// refusalKey keys the context's context.CancelCauseFunc that a refusal
// of NATS calls (stopOnRefusal).
type refusalKey struct{}

// stopOnRefusal makes a one-shot command's context end at the first
// request NATS refuses its user, with the refusal as its cause: the
// command stops at once (markRunErrors says what was refused) instead of
// waiting out timeouts or retries. A command that serves until stopped
// (worker, serve) goes on: a request refused there fails that request.
func stopOnRefusal(cmd *cobra.Command) {
	if cmd.Name() == "worker" || cmd.Name() == "serve" || cmd.Context() == nil {
		return
	}
	ctx, cancel := context.WithCancelCause(cmd.Context())
	cmd.SetContext(context.WithValue(ctx, refusalKey{}, cancel))
}

// outputFlags are the flags of commands that write results.
type outputFlags struct {
	format string
	out    string
}

func (f *outputFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.format, "format", string(result.Text), "output `format`: text or jsonl")
	cmd.Flags().StringVarP(&f.out, "out", "o", "", "write the results to `FILE` instead of standard output")
}

// output is where a command writes results: checked, and the file
// created, before any work starts.
type output struct {
	format result.Format
	w      io.WriteCloser
	name   string // the file, or "standard output"
	path   string // the file, or "" for standard output
}

// open checks the format and creates the output file.
func (f *outputFlags) open(cmd *cobra.Command) (*output, error) {
	format, err := result.ParseFormat(f.format)
	if err != nil {
		return nil, usageErrorf("--format %q: want %s or %s", f.format, result.Text, result.JSONL)
	}
	w, name, err := createOutput(cmd, f.out)
	if err != nil {
		return nil, err
	}
	path := f.out
	if path == "-" {
		path = ""
	}
	return &output{format: format, w: w, name: name, path: path}, nil
}

// Close closes the output file.
func (o *output) Close() error {
	if err := o.w.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", o.name, err)
	}
	return nil
}

// waitOptions say how waitAndWrite waits and what its summary says.
type waitOptions struct {
	// resumable: the job goes on when this process stops waiting (it is
	// not on this process's embedded NATS server), so stopping says how
	// to collect it later.
	resumable bool
	// timeout bounds the wait (job.wait_timeout); 0 waits as long as it
	// takes.
	timeout time.Duration
	// timed: this process followed the job from its submission (submit
	// --wait, solve), so the summary gives its time and rate. A later
	// 'job wait' does not know when the job's last result came.
	timed bool
	// started is the submission of the job when this process is
	// publishing it (submit --wait, solve): its results are written while
	// it publishes, and when it fails, its error ends the wait.
	started *producer.Started
	// submitted, if set, reports what the submission did, once it has
	// published everything.
	submitted func(*producer.Submitted)
	// failed words the error of a submission that failed for the
	// command.
	failed func(error) error
}

// waitAndWrite follows job id (client.FollowWith) with a progress bar on a
// terminal, writing its results in input order to out as they come, then
// a summary on stderr. While NATS does not answer, the bar says what it
// waits for ("waiting: NATS unreachable since 12:03:04"), and so it does
// while no worker is listening; without a terminal each is logged once
// when it starts, and its end too. It returns
// an exit status error when some results are not unique. When ctx ends,
// or wo.timeout passes, while waiting, it says how to resume (when
// resumable) or that the job stopped.
func waitAndWrite(ctx context.Context, cmd *cobra.Command, c *client.Client, log *slog.Logger, id string, out *output, wo waitOptions) error {
	stderr := cmd.ErrOrStderr()
	wctx := ctx
	if wo.timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, wo.timeout)
		defer cancel()
	}
	d := &waitDisplay{log: log, newBar: func() *progress { return newProgress(stderr, "solving", -1) }}
	w := result.NewWriter(out.w, out.format)
	var sum result.Summary
	fctx, stopFollowing := context.WithCancel(wctx)
	defer stopFollowing()
	reported := make(chan struct{})
	var sub producer.Submitted // the submission's, once reported is closed
	var serr error
	if st := wo.started; st != nil {
		// Once the submission is over: what it did, or, when it failed,
		// the end of the wait (the job will never finish).
		go func() {
			defer close(reported)
			sub, serr = st.Wait()
			switch {
			case serr != nil:
				stopFollowing()
			case wo.submitted != nil:
				d.print(func() { wo.submitted(&sub) })
			}
		}()
	} else {
		close(reported)
	}
	st, err := c.FollowWith(fctx, id, func(r result.Result) error {
		sum.Add(r)
		return w.Write(r)
	}, client.FollowOptions{Brief: out.format != result.JSONL, Progress: d.update})
	d.close()
	// Publishing goes on when only the wait stopped (wctx, or out's
	// error): the job then runs on without this process.
	<-reported
	if serr != nil {
		return wo.failed(serr)
	}
	last := d.last
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		state, lines := st.State, st.Lines
		if st.ID == "" {
			state, lines = last.Record.State, last.Record.Lines
		}
		publishing := state == job.Publishing || state == ""
		if wo.started != nil && publishing {
			// Read before publishing ended: every line is published now.
			lines, publishing = sub.Lines, false
		}
		written := writtenOf(int64(sum.Total()), lines, publishing)
		switch {
		case ctx.Err() != nil && !wo.resumable:
			fmt.Fprintf(stderr, "interrupted: job %s stopped with %s\n", id, written)
			return &exitError{code: ExitInterrupted}
		case ctx.Err() != nil:
			fmt.Fprintf(stderr, "stopped waiting; job %s keeps running (%s). Resume with:\n  %s\n", id, written, resumeCommand(id, out))
			return &exitError{code: ExitInterrupted}
		case wctx.Err() != nil && wo.resumable:
			fmt.Fprintf(stderr, "gave up waiting after %s (job.wait_timeout); job %s keeps running (%s). Resume with:\n  %s\n",
				roundDuration(wo.timeout), id, written, resumeCommand(id, out))
			return &exitError{code: ExitTimeout}
		case wctx.Err() != nil:
			fmt.Fprintf(stderr, "gave up waiting after %s (job.wait_timeout): job %s stopped with %s\n", roundDuration(wo.timeout), id, written)
			return &exitError{code: ExitTimeout}
		}
		return jobError(id, err)
	}
	rec := recordOf(&st)
	fmt.Fprintln(stderr, summary(id, &rec, &sum, wo.timed, time.Now()))
	if !sum.OK() {
		return &exitError{code: ExitFailure}
	}
	return nil
}

// waitDisplay shows the progress of a job followed to its end: a bar on a
// terminal, with what it waits for, if anything; without a terminal, a
// log line when an outage starts and one when it ends.
type waitDisplay struct {
	log    *slog.Logger
	newBar func() *progress // nil when not on a terminal

	mu       sync.Mutex // update, print and close run on several goroutines
	bar      *progress
	last     producer.Progress
	totalSet bool
}

// print runs f, which writes lines on stderr, with the bar cleared.
func (d *waitDisplay) print(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bar.Clear()
	f()
}

// close removes the bar.
func (d *waitDisplay) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bar.Close()
}

// update shows p (a producer.FollowOptions.Progress).
func (d *waitDisplay) update(p producer.Progress) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bar == nil {
		if d.bar = d.newBar(); d.bar == nil {
			d.bar = &progress{} // not a terminal: nothing to draw
		}
	}
	if !d.totalSet && p.Record.State != job.Publishing && p.Record.State != "" {
		d.bar.SetTotal(int(p.Record.Lines))
		d.totalSet = true
	}
	switch {
	case p.Waiting != "" && p.Waiting != d.last.Waiting:
		d.bar.Describe("waiting: " + p.Waiting)
		// Once per outage, however its cause is worded.
		if d.bar.bar == nil && d.last.Waiting == "" {
			d.log.Warn("waiting: " + p.Waiting)
		}
	case p.Waiting == "" && d.last.Waiting != "":
		d.bar.Describe(solving(p))
		if d.bar.bar == nil {
			d.log.Info("no longer waiting: NATS answers again")
		}
	case p.Waiting == "" && p.NoWorkers != d.last.NoWorkers:
		d.bar.Describe(solving(p))
	}
	if p.NoWorkers != d.last.NoWorkers && d.bar.bar == nil {
		if p.NoWorkers {
			d.log.Warn("waiting: " + noWorkers + "; start one with 'sudoku worker'")
		} else {
			d.log.Info("a worker is listening: solving")
		}
	}
	d.bar.Set(int(p.Lines))
	d.last = p
}

// noWorkers is what a job waits for when no worker answers.
const noWorkers = "no worker is listening"

// solving is what the bar says while NATS answers: solving, or that no
// worker is listening.
func solving(p producer.Progress) string {
	if p.NoWorkers {
		return "waiting: " + noWorkers + " (start one: sudoku worker)"
	}
	return "solving"
}

// recordOf is the part of a job's record that summary shows: its counts
// and times.
func recordOf(st *producer.Status) job.Record {
	r := job.Record{ID: st.ID, Tally: st.Tally, Created: st.Created}
	if st.Finished != nil {
		r.Finished = *st.Finished
	}
	return r
}

// writtenOf says how many of a job's lines results were written: "12 of
// 40 results written", or "12 results written of the 40 lines submitted
// so far" while its producer still publishes.
func writtenOf(n, lines int64, publishing bool) string {
	if publishing {
		return fmt.Sprintf("%d results written of the %d lines submitted so far", n, lines)
	}
	return fmt.Sprintf("%d of %d results written", n, lines)
}

// resumeCommand is the command that collects job id's results again from
// the first, to the same output in the same format.
func resumeCommand(id string, out *output) string {
	cmd := "sudoku job wait"
	if out.format != result.Text {
		cmd += " --format " + string(out.format)
	}
	if out.path != "" {
		cmd += " --out " + shellQuote(out.path)
	}
	return cmd + " " + id
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// summary is the last line of a job followed to its end:
//
//	job ID: 46 puzzles in 1.2s (38/s): 43 unique, 3 invalid (30 from the workers, 10 from the cache, 3 repeats of earlier lines)
//
// The time, from the job's creation to when it was marked finished (or
// now, when it could not be), and the rate only when timed.
func summary(id string, r *job.Record, sum *result.Summary, timed bool, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s: %s", id, result.Puzzles(sum.Total()))
	if timed && !r.Created.IsZero() {
		end := now
		if r.Finished.After(r.Created) {
			end = r.Finished
		}
		elapsed := end.Sub(r.Created)
		fmt.Fprintf(&b, " in %s (%.0f/s)", roundDuration(elapsed), float64(sum.Total())/max(elapsed.Seconds(), 1e-9))
	}
	fmt.Fprintf(&b, ": %s%s", sum.Counts(), sources(r, int64(sum.Cached())))
	return b.String()
}

// sources says where a job's answers came from, when not all from the
// workers' solvers: " (30 from the workers, 10 from the cache, 3 repeats
// of earlier lines)", or "". Invalid lines are in the counts by status
// already. cached is the number of results read that came from the cache:
// those the producer found (the record's Cached) and those the workers
// found.
func sources(r *job.Record, cached int64) string {
	cached = max(cached, r.Cached)
	if cached == 0 && r.Repeated == 0 {
		return ""
	}
	var parts []string
	if solved := r.Lines - r.Invalid - r.Repeated - cached; solved > 0 {
		parts = append(parts, fmt.Sprintf("%d from the workers", solved))
	}
	if cached > 0 {
		parts = append(parts, fmt.Sprintf("%d from the cache", cached))
	}
	switch {
	case r.Repeated == 1:
		parts = append(parts, "1 repeat of an earlier line")
	case r.Repeated > 1:
		parts = append(parts, fmt.Sprintf("%d repeats of earlier lines", r.Repeated))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// jobError words the errors of following a job for people.
func jobError(id string, err error) error {
	switch {
	case errors.Is(err, job.ErrNotFound):
		return fmt.Errorf("no job %s (never submitted, removed, or expired)", id)
	case errors.Is(err, producer.ErrJobFailed):
		return fmt.Errorf("job %s failed and will never finish: %w", id, err)
	case errors.Is(err, job.ErrCancelled):
		return &exitError{code: ExitCancelled, err: fmt.Errorf("%w; the results written are those done before", err)}
	}
	return err
}

// logStart logs a process's start, msg with args, then its effective
// configuration one section a line ("configuration" config.nats.url=...,
// then config.redis..., as in the configuration file, secrets redacted),
// so that no line is thousands of characters long.
func logStart(log *slog.Logger, msg string, cfg *config.Config, args ...any) {
	log.Info(msg, args...)
	for _, section := range cfg.LogValue().Group() {
		log.Info("configuration", slog.Attr{Key: "config", Value: slog.GroupValue(section)})
	}
}

// discardLogger logs nothing.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startLocalWorker runs a worker in this process on conn with opts
// (client.StartWorker), its endpoints submitting with cfg's settings,
// for 'sudoku solve' and 'sudoku serve --embedded', until the returned
// stop is called; stop waits for it. Its start and stop are not logged
// (not news here), its warnings are.
func startLocalWorker(conn *app.Conn, cfg *config.Config, opts worker.Options, log *slog.Logger) (stop func()) {
	opts.Logger = slog.New(quietHandler{log.Handler()})
	_, stop = client.StartWorker(conn, opts, app.ProducerOptions(cfg, opts.Logger))
	return stop
}

// quietHandler drops records below Warn.
type quietHandler struct{ slog.Handler }

// Enabled reports whether l is Warn or above and enabled by the handler.
func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}
