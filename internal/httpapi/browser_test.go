package httpapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// chromiumPath returns the Chromium to drive: $SUDOKU_TEST_CHROMIUM, or the
// Debian package's /usr/bin/chromium, or one on $PATH; an error when there
// is none.
func chromiumPath() (string, error) {
	if p := os.Getenv("SUDOKU_TEST_CHROMIUM"); p != "" {
		found, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("$SUDOKU_TEST_CHROMIUM: %w", err)
		}
		return found, nil
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium, chromium-browser or google-chrome on $PATH")
}

// browser starts a headless Chromium for the test, with a private
// profile and nothing that reaches the network on its own. Without a
// Chromium the test is skipped, and fails when CI is set: CI must open
// the dashboard.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin, err := chromiumPath()
	if err != nil {
		testenv.Unavailable(t, "Chromium", fmt.Errorf("%w (install it with `apt-get install -y chromium`, or set SUDOKU_TEST_CHROMIUM)", err))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1400),
	)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first Run starts the browser; its context must not have a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	return ctx
}

// run runs browser actions within d.
func run(t *testing.T, ctx context.Context, d time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// poll waits until the JavaScript expression is true in the page,
// checking every 20ms, for d at most.
func poll(d time.Duration, expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(d))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// TestDashboardInBrowser loads the dashboard in headless Chromium, pastes
// a puzzle and sees the solved grid, submits a job through the API and
// watches its progress bar reach 100%, sees what became of each job's
// lines (solved, cached, repeated, invalid) and a failed job's error,
// checks the page on a phone's screen, and saves screenshots in the
// test's folder (or $SUDOKU_SCREENSHOT_DIR) and, with
// SUDOKU_UPDATE_SCREENSHOT=1, the README's docs/dashboard.png.
func TestDashboardInBrowser(t *testing.T) {
	ctx := browser(t)
	e := newEnv(t, envOptions{opts: Options{StatsInterval: 250 * time.Millisecond}})
	// Some history for the chart and the job list.
	warmPuzzles := variants(t, 3000, clue17)
	warm := e.submit("text/plain", strings.Join(warmPuzzles, "\n"), "")
	e.waitJob(warm.ID, 30*time.Second)

	run(t, ctx, 20*time.Second, "load the dashboard",
		chromedp.Navigate(e.url+"/"),
		chromedp.WaitVisible(chromedp.CSS("#conn.on")),
		chromedp.WaitVisible(chromedp.CSS(`.bar[data-job="`+warm.ID+`"]`)),
	)
	if v := eval[string](t, ctx, `document.getElementById('workers').textContent`); v != "1" {
		t.Errorf("workers online shows %q, want 1", v)
	}
	// counts returns the text of a job's counts and meta lines.
	counts := func(id string) string {
		t.Helper()
		return eval[string](t, ctx, `(() => { const li = document.querySelector('li.job[data-job="`+id+`"]');`+
			` return li ? li.querySelector('.counts').textContent + ' | ' + li.querySelector('.meta').textContent : 'no such job'; })()`)
	}
	run(t, ctx, 20*time.Second, "see the first job finished",
		poll(15*time.Second, `document.querySelector('li.job[data-job="`+warm.ID+`"] .state.finished') !== null`))
	if c := counts(warm.ID); !strings.HasPrefix(c, "3.0k solved by workers | 3.0k of 3.0k lines done") {
		t.Errorf("the first job shows %q", c)
	}

	// The same puzzles again: every one cached, none solved, and the job
	// says so rather than looking empty.
	e.waitCached(warmPuzzles)
	cached := e.submit("text/plain", strings.Join(warmPuzzles, "\n"), "")
	run(t, ctx, 20*time.Second, "see the cached job finished",
		poll(15*time.Second, `document.querySelector('li.job[data-job="`+cached.ID+`"] .state.finished') !== null`))
	if c := counts(cached.ID); !strings.HasPrefix(c, "3.0k cached | 3.0k of 3.0k lines done") {
		t.Errorf("the cached job shows %q", c)
	}
	if w := eval[string](t, ctx, `document.querySelector('.bar[data-job="`+cached.ID+`"] .fill').style.width`); w != "100%" {
		t.Errorf("the bar of the cached job is %s wide", w)
	}

	// A failed job shows its state and its error.
	failed := e.failedJob(relabelled(t, 25, 77), "test: the upload broke") // none cached
	run(t, ctx, 20*time.Second, "see the failed job",
		chromedp.WaitVisible(chromedp.CSS(`li.job[data-job="`+failed+`"] .state.failed`)))
	if msg := eval[string](t, ctx, `document.querySelector('li.job[data-job="`+failed+`"] .error').textContent`); !strings.Contains(msg, "test: the upload broke") {
		t.Errorf("the failed job's error shows %q", msg)
	}
	// Its counts are what it read and sent before it broke off (when the
	// record was marked failed), and never all 25 lines done: the batches
	// it sent (10 lines each, the first at once) are solved, and those
	// results count, whether or not they came before the failure.
	if c := counts(failed); !regexp.MustCompile(`^(25 lines read|20 to workers) \| (0|10|20) of 25 lines done`).MatchString(c) {
		t.Errorf("the failed job shows %q", c)
	}

	// The cache down: the banner says so, and that jobs go on; then gone.
	e.fault.down.Store(true)
	key := strings.Repeat("c", 64)
	if res, data := e.get("/v1/solutions/" + key); res.StatusCode != 503 {
		t.Fatalf("a lookup with the cache down: %d %s", res.StatusCode, data)
	}
	run(t, ctx, 20*time.Second, "see the cache down",
		poll(15*time.Second, `!document.getElementById('banner').hidden`+
			` && document.getElementById('banner').textContent.includes('not answering')`+
			` && document.getElementById('hits').textContent.endsWith('cache down')`))
	e.fault.down.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for res, _ := e.get("/v1/solutions/" + key); res.StatusCode != 404; res, _ = e.get("/v1/solutions/" + key) {
		if time.Now().After(deadline) {
			t.Fatalf("the cache back, but a lookup: %d", res.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	run(t, ctx, 20*time.Second, "see the cache back", poll(15*time.Second, `document.getElementById('banner').hidden`))

	// Paste a puzzle (as a grid) and solve it.
	run(t, ctx, 20*time.Second, "solve a puzzle",
		chromedp.SetValue(chromedp.CSS("#puzzle"), grid1),
		chromedp.Click(chromedp.CSS("#solve")),
		chromedp.WaitVisible(chromedp.CSS("#grid")),
	)
	cells := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#grid td')).map(td => td.textContent)`)
	if got := strings.Join(cells, ""); got != solution1 {
		t.Errorf("the grid shows %q, want the solution %q", got, solution1)
	}
	givens := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#grid td.given')).map(td => td.textContent)`)
	g, _ := solver.Parse(puzzle1)
	if len(givens) != g.Givens() {
		t.Errorf("%d cells are marked as givens, want %d", len(givens), g.Givens())
	}
	weight := eval[string](t, ctx, `getComputedStyle(document.querySelector('#grid td.given')).fontWeight`)
	if weight < "600" {
		t.Errorf("givens are not set apart: font-weight %s", weight)
	}
	status := eval[string](t, ctx, `document.getElementById('solve-status').textContent`)
	if !strings.Contains(status, "unique") {
		t.Errorf("status line %q", status)
	}

	// A bad puzzle shows the API's message, which names the cell.
	run(t, ctx, 20*time.Second, "solve a bad puzzle",
		chromedp.SetValue(chromedp.CSS("#puzzle"), puzzle1[:11]+"x"+puzzle1[12:]),
		chromedp.Click(chromedp.CSS("#solve")),
		chromedp.WaitVisible(chromedp.CSS("#solve-status.error")),
	)
	if msg := eval[string](t, ctx, `document.getElementById('solve-status').textContent`); !strings.Contains(msg, "r2c3") {
		t.Errorf("bad puzzle message %q does not name the cell", msg)
	}
	run(t, ctx, 20*time.Second, "solve again",
		chromedp.SetValue(chromedp.CSS("#puzzle"), puzzle1),
		chromedp.Click(chromedp.CSS("#solve")),
		chromedp.WaitVisible(chromedp.CSS("#solve-status.ok")),
	)

	// A job submitted through the API: its bar appears and reaches 100%.
	lines := append(variants(t, 1500, hardest), "not a puzzle", variants(t, 1, hardest)[0])
	job := e.submit("text/plain", strings.Join(lines, "\n"), "")
	bar := `.bar[data-job="` + job.ID + `"]`
	run(t, ctx, 20*time.Second, "see the job", chromedp.WaitVisible(chromedp.CSS(bar)))
	run(t, ctx, 60*time.Second, "watch the job reach 100%", chromedp.WaitVisible(chromedp.CSS(bar+`[aria-valuenow="100"]`)))
	if w := eval[string](t, ctx, `document.querySelector('`+bar+` .fill').style.width`); w != "100%" {
		t.Errorf("the bar of the finished job is %s wide", w)
	}
	if n := eval[int](t, ctx, `points.filter(v => v > 0).length`); n == 0 {
		t.Errorf("the chart has no point above 0 after two jobs")
	}
	// For the picture, wait until the figures have caught up: the job is
	// listed as finished and the queue shows nothing waiting or in work.
	run(t, ctx, 20*time.Second, "see the queue idle after the job",
		poll(15*time.Second, `document.querySelector('li.job[data-job="`+job.ID+`"] .state.finished') !== null`+
			` && document.getElementById('pending').textContent === '0'`+
			` && document.getElementById('ackpending').textContent === '0'`))
	if c := counts(job.ID); !strings.HasPrefix(c, "1.5k solved by workers1 repeated1 invalid | 1.5k of 1.5k lines done") {
		t.Errorf("the job of hard puzzles shows %q", c)
	}
	if v := eval[string](t, ctx, `document.querySelector('li.job[data-job="`+job.ID+`"] .state').textContent`); v != "finished, 1 unsolved" {
		t.Errorf("the job of hard puzzles is %q, want \"finished, 1 unsolved\"", v)
	}

	update := os.Getenv("SUDOKU_UPDATE_SCREENSHOT") == "1"
	if update {
		showcase(t, ctx, e, warm)
	}
	dir := os.Getenv("SUDOKU_SCREENSHOT_DIR") // to keep them; else the test's folder
	if dir == "" {
		dir = t.TempDir()
	}
	shot := filepath.Join(dir, "dashboard.png")
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)
	if update {
		// The README's picture: the top of the page, as a laptop shows it.
		if png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot()); err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		docs := filepath.Join("..", "..", "docs", "dashboard.png")
		if err := os.MkdirAll(filepath.Dir(docs), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(docs, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", docs)
	}

	// On a phone's screen nothing is wider than the screen. The page is
	// measured once its layout has the phone's width and the style sheet's
	// narrow-screen rule applies.
	run(t, ctx, 20*time.Second, "phone screen",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		poll(10*time.Second, `document.documentElement.clientWidth === 390 && matchMedia('(max-width: 420px)').matches`),
	)
	if over := eval[int](t, ctx, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); over > 0 {
		t.Errorf("on a 390px screen the page is %dpx too wide", over)
	}
	phone, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("phone screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dashboard-phone.png"), phone, 0o644); err != nil {
		t.Fatal(err)
	}
}

// showcase puts the dashboard in a state worth a picture for the README:
// a cached resubmission, a few jobs of hard puzzles a second apart for the
// chart, and a large job caught half-way.
func showcase(t *testing.T, ctx context.Context, e *env, warm Submitted) {
	t.Helper()
	seed := uint64(0)
	relabelled := func(n int) string {
		seed++
		return strings.Join(relabelled(t, n, seed), "\n")
	}
	res, data := e.get("/v1/jobs/" + warm.ID)
	if res.StatusCode != 200 {
		t.Fatalf("warm job: %s", data)
	}
	e.submit("text/plain", strings.Join(variants(t, 3000, clue17), "\n"), "") // all cached
	for range 6 {
		s := e.submit("text/plain", relabelled(2000), "")
		e.waitJob(s.ID, time.Minute)
		// A gap between the jobs' peaks: the chart's last second at 0.
		run(t, ctx, 10*time.Second, "see a gap in the chart",
			poll(8*time.Second, `points.length >= 4 && points.slice(-4).every(v => v === 0)`))
	}
	big := e.submit("text/plain", relabelled(40000), "")
	bar := `.bar[data-job="` + big.ID + `"]`
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		pct := eval[int](t, ctx, `Number((document.querySelector('`+bar+`') || {getAttribute: () => 0}).getAttribute('aria-valuenow'))`)
		if pct >= 35 && pct <= 85 {
			return
		}
		if pct == 100 {
			t.Logf("showcase: the large job finished before the picture")
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
