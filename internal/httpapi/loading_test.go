package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardLoading: until the event stream brings its first figures,
// the dashboard says it is loading; it never says there are no jobs while
// it does not know, and once the figures come it lists the jobs there are.
func TestDashboardLoading(t *testing.T) {
	ctx := browser(t)
	e := newEnv(t, envOptions{opts: Options{StatsInterval: 250 * time.Millisecond}})
	j := e.submit("text/plain", puzzle1, "")
	e.waitJob(j.ID, 30*time.Second)
	// The same API, its event stream held until the test lets it go.
	release := make(chan struct{})
	h := e.srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/events" {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		e.srv.Close() // ends the stream, so that ts.Close does not wait for it
		ts.Close()
	})
	run(t, ctx, 20*time.Second, "load the dashboard", chromedp.Navigate(ts.URL+"/"))
	type state struct {
		Loading, Empty bool
		Workers        string
	}
	look := func() state {
		return eval[state](t, ctx, `({loading: !document.getElementById('jobs-loading').hidden,`+
			` empty: !document.getElementById('jobs-empty').hidden,`+
			` workers: document.getElementById('workers').textContent})`)
	}
	s := look()
	if !s.Loading || s.Empty || s.Workers != "…" {
		t.Errorf("before the first figures: %+v, want loading, not empty, workers …", s)
	}
	close(release)
	run(t, ctx, 20*time.Second, "see the job",
		chromedp.WaitVisible(chromedp.CSS(`li.job[data-job="`+j.ID+`"]`)))
	if s := look(); s.Loading || s.Empty || s.Workers != "1" {
		t.Errorf("after the first figures: %+v, want neither loading nor empty, 1 worker", s)
	}
}
