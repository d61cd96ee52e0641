package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/client"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/input"
	"github.com/sudoku-queue/sudoku-queue/internal/local"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/result"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/producer"
	"github.com/sudoku-queue/sudoku-queue/worker"
)

var quiet = slog.New(slog.DiscardHandler)

// endpoints are the service's endpoints of q over a client of q and c
// submitting with opts, as 'sudoku worker' makes them.
func endpoints(q *queue.Queue, c *cache.Guard, opts producer.Options) []worker.Endpoint {
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	return client.New(&app.Conn{NC: q.JS.Conn(), JS: q.JS, Queue: q, Cache: c}, opts).ServiceEndpoints()
}

// startWorker runs a worker of q with the service's endpoints until the
// test ends. As 'sudoku worker' does (client.NewWorker),
// the endpoints ask the worker for an owner's usage, for its quotas.
func startWorker(t *testing.T, nc *nats.Conn, q *queue.Queue, c *cache.Guard, opts producer.Options) {
	t.Helper()
	var w *worker.Worker
	opts.Usage = func(ctx context.Context, owner string) (int, int64, error) { return w.Usage(ctx, owner) }
	w = worker.New(nc, q, c, worker.Options{Concurrency: 2, Logger: quiet, Endpoints: endpoints(q, c, opts)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("worker: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("worker not ready after 10s")
	}
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker Run: %v", err)
			}
		})
	})
}

// request sends body to subject and returns the reply, or its micro
// error.
func request(t *testing.T, nc *nats.Conn, subject, body string) ([]byte, *queue.ServiceError) {
	t.Helper()
	m, err := nc.Request(subject, []byte(body), 10*time.Second)
	if err != nil {
		t.Fatalf("request on %s: %v", subject, err)
	}
	return m.Data, queue.ServiceErrorOf(m)
}

// clientResult is what a client in another language needs of a result of
// the JSON form: it decodes no more.
type clientResult struct {
	Line     int    `json:"line"`
	Status   string `json:"status"`
	Solution string `json:"solution"`
	Error    string `json:"error"`
}

// clientBatch is a results message in the JSON form, as such a client
// reads it.
type clientBatch struct {
	V       int            `json:"v"`
	Job     string         `json:"job"`
	Batch   int64          `json:"batch"`
	First   int64          `json:"first"`
	Results []clientResult `json:"results"`
}

// text is result.AppendText as a client in another language writes it.
func (r *clientResult) text() string {
	if r.Status == "unique" || r.Status == "solved" {
		return r.Solution
	}
	s := "error: "
	if r.Line > 0 {
		s += "line " + strconv.Itoa(r.Line) + ": "
	}
	if r.Error != "" {
		s += r.Error
	} else {
		s += r.Status
	}
	if r.Status == "multiple" && r.Solution != "" {
		s += ": " + r.Solution
	}
	return s
}

// readResults reads the results of a job as a client in another language
// would: every message on the reply's filter in its stream, with a plain
// ordered consumer, until there are batches of them; then in input order
// (by batch index), as text lines.
func readResults(t *testing.T, js jetstream.JetStream, rep *producer.Submitted) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// As the protocol says a client may: from start_seq, where every
	// result of the job is.
	c, err := js.OrderedConsumer(ctx, rep.Results.Stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{rep.Results.Filter},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: rep.Results.StartSeq})
	if err != nil {
		t.Fatal(err)
	}
	var batches []clientBatch
	for int64(len(batches)) < rep.Batches {
		m, err := c.Next(jetstream.FetchMaxWait(20 * time.Second))
		if err != nil {
			t.Fatalf("job %s: %d of %d results messages: %v", rep.ID, len(batches), rep.Batches, err)
		}
		var b clientBatch
		if err := json.Unmarshal(m.Data(), &b); err != nil {
			t.Fatalf("results message %s is not JSON: %v: %.100q", m.Subject(), err, m.Data())
		}
		if b.V != 1 || b.Job != rep.ID || !strings.HasSuffix(m.Subject(), "."+strconv.FormatInt(b.Batch, 10)) {
			t.Fatalf("results message on %s: v %d, job %s, batch %d", m.Subject(), b.V, b.Job, b.Batch)
		}
		batches = append(batches, b)
	}
	sort.Slice(batches, func(i, j int) bool { return batches[i].Batch < batches[j].Batch })
	var lines []string
	next, line := int64(0), 0
	for i, b := range batches {
		if b.Batch != int64(i) || b.First != next {
			t.Fatalf("batch %d (first item %d) at %d, item %d", b.Batch, b.First, i, next)
		}
		next += int64(len(b.Results))
		for _, r := range b.Results {
			if r.Line <= line {
				t.Fatalf("batch %d: line %d after line %d", b.Batch, r.Line, line)
			}
			line = r.Line
			lines = append(lines, r.text())
		}
	}
	return lines
}

// localLines solves in with internal/local, as 'sudoku solve --local'
// does, and returns its text lines.
func localLines(t *testing.T, in *input.Reader, first bool) []string {
	t.Helper()
	var out []string
	err := local.Run(context.Background(), in, func(r result.Result) error {
		out = append(out, r.Text())
		return nil
	}, local.Options{Workers: 2, FirstSolution: first})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSubmit(t *testing.T) {
	mixed := readFile(t, "../cli/testdata/mixed.txt")
	hard := strings.Join(strings.Split(readFile(t, "../cli/testdata/hardest_200.txt"), "\n")[:20], "\n")
	puzzles := testenv.Puzzles(t, "../cli/testdata/17_clue_200.txt", 300)
	grid := "53..7....\n6..195...\n.98....6.\n8...6...3\n4..8.3..1\n7...2...6\n.6....28.\n...419..5\n....8..79"
	for _, server := range testenv.Servers {
		t.Run(server, func(t *testing.T) {
			tq := testenv.NewQueue(t, server, queue.Options{})
			c := cache.NewGuard(cache.NewMemory(0), cache.GuardOptions{Logger: quiet})
			startWorker(t, tq.NC, tq.Queue, c, producer.Options{BatchSize: 64, Logger: quiet})
			js, err := jetstream.New(tq.NC)
			if err != nil {
				t.Fatal(err)
			}
			jsonBody := func(r queue.SubmitRequest) string {
				b, err := json.Marshal(&r)
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			// The same puzzles as lines, for the JSON requests.
			elems := append(append([]string{"", "# a comment", grid, "12", "1\n2"}, puzzles[:100]...), puzzles[:5]...)
			for _, tc := range []struct {
				name    string
				body    string
				in      func() *input.Reader // what 'sudoku solve --local' reads
				first   bool
				form    string
				invalid int64
			}{
				{"text", mixed + "\n" + grid + "\n\n" + hard + "\n" + strings.Join(puzzles, "\n"),
					func() *input.Reader {
						return input.NewReader(strings.NewReader(mixed + "\n" + grid + "\n\n" + hard + "\n" + strings.Join(puzzles, "\n")))
					}, false, queue.FormJSON, 2},
				{"json", jsonBody(queue.SubmitRequest{Puzzles: elems}),
					func() *input.Reader {
						lines := slices.Clone(elems)
						lines[2], lines[4] = input.OneLine(grid), "1 2"
						return input.NewLineReader(strings.NewReader(strings.Join(lines, "\n")))
					}, false, queue.FormJSON, 2},
				{"json first force", `{"puzzles": ["` + strings.Repeat(".", 81) + `", "` + puzzles[0] + `"], "first": true, "force": true}`,
					func() *input.Reader {
						return input.NewLineReader(strings.NewReader(strings.Repeat(".", 81) + "\n" + puzzles[0]))
					}, true, queue.FormJSON, 0},
				{"binary", `{"puzzles": ["` + puzzles[1] + `"], "json_results": false}`, nil, false, queue.FormBinary, 0},
			} {
				t.Run(tc.name, func(t *testing.T) {
					data, se := request(t, tq.NC, tq.Opts.SubmitSubject("alice"), tc.body)
					if se != nil {
						t.Fatalf("submit: %v", se)
					}
					var rep producer.Submitted
					if err := json.Unmarshal(data, &rep); err != nil {
						t.Fatalf("submit reply %s: %v", data, err)
					}
					if !strings.HasPrefix(rep.ID, "alice.") {
						t.Fatalf("submit as alice: job id %q, want alice.<serial>: the caller owns the job", rep.ID)
					}
					want := queue.ResultsInfo{Stream: tq.Opts.ResultsStream(), Filter: tq.Opts.ResultsFilter(rep.ID), Form: tc.form,
						StartSeq: max(1, rep.Results.StartSeq)}
					if rep.Results != want || rep.Invalid != tc.invalid || len(rep.InvalidLines) != int(tc.invalid) || rep.Repeated != 0 && tc.form == queue.FormJSON {
						t.Fatalf("submit reply %s: want results %+v and %d invalid lines", data, want, tc.invalid)
					}
					if tc.in == nil {
						return
					}
					wantLines := localLines(t, tc.in(), tc.first)
					if rep.Lines != int64(len(wantLines)) {
						t.Fatalf("submit reply: %d lines, want %d", rep.Lines, len(wantLines))
					}
					got := readResults(t, js, &rep)
					if d := diff(got, wantLines); d != "" {
						t.Fatalf("results differ from sudoku solve --local:\n%s", d)
					}
					// Every batch is in: the status says so, and the job is
					// finished without any reader's help (just after its last
					// results are stored, when they are counted).
					var st producer.Status
					for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
						data, se = request(t, tq.NC, tq.Opts.StatusSubject("alice"), rep.ID)
						if se != nil {
							t.Fatalf("status: %v", se)
						}
						if err := json.Unmarshal(data, &st); err != nil {
							t.Fatalf("status reply %s: %v", data, err)
						}
						if st.State == "finished" || time.Now().After(deadline) {
							break
						}
					}
					var sum int64
					for _, n := range st.Counts {
						sum += n
					}
					if !st.Complete || st.State != "finished" || st.Finished == nil || st.BatchesDone != rep.Batches || st.Done != rep.Lines ||
						sum != rep.Lines || st.Results != rep.Results || st.First != tc.first || !st.JSONResults {
						t.Fatalf("status reply %s after every result, for submit reply %s", data, mustJSON(rep))
					}
				})
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// diff describes the first lines where got and want differ.
func diff(got, want []string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < max(len(got), len(want)) && n < 5; i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			fmt.Fprintf(&b, "line %d:\n  got  %q\n  want %q\n", i+1, g, w)
			n++
		}
	}
	if len(got) != len(want) {
		fmt.Fprintf(&b, "%d lines, want %d\n", len(got), len(want))
	}
	return b.String()
}

func TestErrors(t *testing.T) {
	tq := testenv.NewQueue(t, "embedded", queue.Options{})
	startWorker(t, tq.NC, tq.Queue, nil, producer.Options{Logger: quiet})
	data, se := request(t, tq.NC, tq.Opts.SubmitSubject("anonymous"), `{"puzzles": ["`+strings.Repeat(".", 81)+`"]}`)
	if se != nil {
		t.Fatal(se)
	}
	var rep producer.Submitted
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, subject, body string
		code, says          string
	}{
		{"submit nothing", tq.Opts.SubmitSubject("anonymous"), "", queue.CodeBadRequest, "no puzzle"},
		{"submit comments", tq.Opts.SubmitSubject("anonymous"), "# nothing\n\n", queue.CodeBadRequest, "no puzzle"},
		{"submit no puzzles", tq.Opts.SubmitSubject("anonymous"), `{"first": true}`, queue.CodeBadRequest, `"puzzles" is missing`},
		{"submit empty puzzles", tq.Opts.SubmitSubject("anonymous"), `{"puzzles": ["", "#"]}`, queue.CodeBadRequest, "no puzzle"},
		{"submit bad JSON", tq.Opts.SubmitSubject("anonymous"), `{"puzzles": "x"}`, queue.CodeBadRequest, "cannot unmarshal"},
		{"submit unknown field", tq.Opts.SubmitSubject("anonymous"), `{"puzzle": ["x"]}`, queue.CodeBadRequest, `unknown field "puzzle"`},
		{"submit trailing data", tq.Opts.SubmitSubject("anonymous"), `{"puzzles": ["x"]} {}`, queue.CodeBadRequest, "after the JSON object"},
		{"status nothing", tq.Opts.StatusSubject("anonymous"), "", queue.CodeBadRequest, `job id ""`},
		{"status bad id", tq.Opts.StatusSubject("anonymous"), "NOT-AN-ID", queue.CodeBadRequest, `job id "NOT-AN-ID"`},
		{"status bad JSON", tq.Opts.StatusSubject("anonymous"), `{"id": "x"}`, queue.CodeBadRequest, `unknown field "id"`},
		{"status id without owner", tq.Opts.StatusSubject("anonymous"), "0123456789abcdefghijklmnop", queue.CodeBadRequest,
			`job id "0123456789abcdefghijklmnop"`},
		{"status id without serial", tq.Opts.StatusSubject("anonymous"), "anonymous.", queue.CodeBadRequest, `job id "anonymous."`},
		{"status unknown job", tq.Opts.StatusSubject("anonymous"), "anonymous.0123456789abcdefghijklmnop", queue.CodeNotFound,
			"no job anonymous.0123456789abcdefghijklmnop"},
		{"submit bad caller", tq.Opts.SubmitSubject("al%ice"), `{"puzzles": ["x"]}`, queue.CodeBadRequest,
			`the subject's last token names the job's owner: owner "al%ice"`},
		{"status bad caller", tq.Opts.StatusSubject("al%ice"), rep.ID, queue.CodeBadRequest, `the subject's last token names the caller`},
		{"cancel bad caller", tq.Opts.CancelSubject("al%ice"), rep.ID, queue.CodeBadRequest, `the subject's last token names the caller`},
		{"cancel bad id", tq.Opts.CancelSubject("anonymous"), "NOT-AN-ID", queue.CodeBadRequest, `job id "NOT-AN-ID"`},
		{"cancel unknown job", tq.Opts.CancelSubject("anonymous"), "anonymous.0123456789abcdefghijklmnop", queue.CodeNotFound,
			"no job anonymous.0123456789abcdefghijklmnop"},
		{"status unknown job JSON", tq.Opts.StatusSubject("anonymous"), `{"job": "anonymous.0123456789abcdefghijklmnop"}`, queue.CodeNotFound,
			"never submitted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, se := request(t, tq.NC, tc.subject, tc.body)
			if se == nil || se.Code != tc.code || !strings.Contains(se.Description, tc.says) {
				t.Fatalf("request %q on %s: reply %s, error %v; want code %s saying %q", tc.body, tc.subject, data, se, tc.code, tc.says)
			}
		})
	}
	// A job known: its status, as text and as JSON.
	for _, body := range []string{rep.ID, " " + rep.ID + "\n", `{"job": "` + rep.ID + `"}`} {
		data, se := request(t, tq.NC, tq.Opts.StatusSubject("anonymous"), body)
		var st producer.Status
		if se != nil || json.Unmarshal(data, &st) != nil || st.ID != rep.ID || st.Lines != 1 {
			t.Errorf("status %q: %s, %v", body, data, se)
		}
	}
}

// TestMetadata checks that 'nats micro info' tells the queue of each
// endpoint.
func TestMetadata(t *testing.T) {
	tq := testenv.NewQueue(t, "embedded", queue.Options{})
	startWorker(t, tq.NC, tq.Queue, nil, producer.Options{Logger: quiet})
	subject, err := micro.ControlSubject(micro.InfoVerb, queue.ServiceName, "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := tq.NC.Request(subject, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatal(err)
	}
	subjects := map[string]string{}
	for _, e := range info.Endpoints {
		subjects[e.Name] = e.Subject
		if e.Name == "solve" {
			continue
		}
		for k, v := range queue.ServiceMetadata(tq.Opts) {
			if e.Metadata[k] != v {
				t.Errorf("endpoint %s: metadata %s = %q, want %q", e.Name, k, e.Metadata[k], v)
			}
		}
		if e.Metadata["description"] == "" {
			t.Errorf("endpoint %s: no description", e.Name)
		}
	}
	want := map[string]string{"solve": tq.Opts.SolveSubject(), "submit": tq.Opts.SubmitSubject("*"),
		"status": tq.Opts.StatusSubject("*"), "cancel": tq.Opts.CancelSubject("*")}
	if fmt.Sprint(subjects) != fmt.Sprint(want) {
		t.Errorf("endpoints %v, want %v", subjects, want)
	}
}
