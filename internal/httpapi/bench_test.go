package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sudoku-queue/sudoku-queue/solver"
)

// The benchmarks are a load generator on loopback: an HTTP client in this
// process against the API on httptest (127.0.0.1), bounded by -benchtime.
// They report what a user of the API sees: requests per second and the
// 50th and 99th percentile latencies. Run them with
//
//	go test -run '^$' -bench . -benchtime 5s ./internal/httpapi/
//
// They need the shared NATS and Redis (and skip without them), but for
// BenchmarkSolveUncachedHard/memory, on an embedded NATS and a memory
// cache.

// benchClient returns a client that keeps n connections to the server.
func benchClient(n int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = n, n
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// latencies collects request latencies from many goroutines.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(ds []time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, ds...)
	l.mu.Unlock()
}

// report reports req/s and the p50 and p99 latencies in microseconds.
func (l *latencies) report(b *testing.B) {
	if len(l.all) == 0 {
		return
	}
	slices.Sort(l.all)
	q := func(p float64) float64 { return float64(l.all[int(p*float64(len(l.all)-1))].Microseconds()) }
	b.ReportMetric(float64(len(l.all))/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(0, "ns/op") // ns/op is elapsed/N over parallel clients: req/s says it better
}

// BenchmarkSolutionsCached measures GET /v1/solutions/{key} of puzzles
// cached in Redis, from 1, 8 and 16 concurrent clients on keep-alive
// connections: "hot" as served (the hot cache answers keys read before),
// "redis" with the hot cache off (a Redis round trip per request).
func BenchmarkSolutionsCached(b *testing.B) {
	for _, variant := range []string{"hot", "redis"} {
		for _, conc := range []int{1, 8, 16} {
			b.Run(fmt.Sprintf("%s/clients=%d", variant, conc), func(b *testing.B) {
				eo := envOptions{noWorker: true}
				if variant == "redis" {
					eo.opts.HotCacheSize = -1
				}
				e := realEnv(b, eo)
				ps := variants(b, 1000, clue17)
				keys := make([]string, len(ps))
				for i, p := range ps {
					g, _ := solver.Parse(p)
					keys[i] = g.Key()
				}
				s := e.submit("text/plain", strings.Join(ps, "\n"), "")
				e.startWorker()
				e.waitJob(s.ID, time.Minute)
				e.waitCached(ps)
				e.stopWorker() // idle, but it would still poll

				client := benchClient(conc)
				var lat latencies
				var next atomic.Int64
				b.SetParallelism(max(1, conc/runtime.GOMAXPROCS(0)))
				if conc < runtime.GOMAXPROCS(0) {
					b.SetParallelism(1)
				}
				b.ResetTimer()
				work := func(pb interface{ Next() bool }) {
					ds := make([]time.Duration, 0, 1<<16)
					for pb.Next() {
						key := keys[next.Add(1)%int64(len(keys))]
						t0 := time.Now()
						res, err := client.Get(e.url + "/v1/solutions/" + key)
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, res.Body)
						res.Body.Close()
						ds = append(ds, time.Since(t0))
						if res.StatusCode != http.StatusOK {
							b.Errorf("status %d", res.StatusCode)
							return
						}
					}
					lat.add(ds)
				}
				if conc == 1 {
					work(&serialPB{n: b.N})
				} else {
					b.RunParallel(func(pb *testing.PB) { work(pb) })
				}
				b.StopTimer()
				lat.report(b)
			})
		}
	}
}

// serialPB counts b.N iterations on one goroutine, like testing.PB.
type serialPB struct{ i, n int }

func (p *serialPB) Next() bool { p.i++; return p.i <= p.n }

// BenchmarkSolveUncachedHard measures POST /v1/solve of hard puzzles
// (top of the hardest list, relabelled so that none is cached): one
// request at a time, through NATS to a worker in this process and back.
func BenchmarkSolveUncachedHard(b *testing.B) {
	for _, backend := range []string{"redis", "memory"} {
		b.Run(backend, func(b *testing.B) {
			var e *env
			if backend == "redis" {
				e = realEnv(b, envOptions{noWorker: true})
			} else {
				e = newEnv(b, envOptions{noWorker: true})
			}
			e.startWorker()
			ps := relabelled(b, b.N, uint64(b.N))
			client := benchClient(1)
			ds := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				res, err := client.Post(e.url+"/v1/solve", "text/plain", strings.NewReader(ps[i]))
				if err != nil {
					b.Fatal(err)
				}
				data, _ := io.ReadAll(res.Body)
				res.Body.Close()
				ds = append(ds, time.Since(t0))
				if res.StatusCode != http.StatusOK || !strings.Contains(string(data), `"cached":false`) {
					b.Fatalf("puzzle %d: %d %s", i, res.StatusCode, data)
				}
			}
			b.StopTimer()
			lat := latencies{all: ds}
			lat.report(b)
		})
	}
}
