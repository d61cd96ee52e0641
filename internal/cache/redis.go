package cache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/result"
)

// Redis is the store in Redis. It is safe for concurrent use.
type Redis struct {
	rdb     redis.UniversalClient
	prefix  string
	ttl     time.Duration
	cluster bool // keys of one command must share a slot: no MGET/MSET across keys
}

// RedisOptions tune NewRedis.
type RedisOptions struct {
	// Prefix starts every key (default "sudoku:").
	Prefix string
	// TTL is how long a result is kept; 0 keeps it until Redis evicts it.
	TTL time.Duration
}

// NewRedis wraps a go-redis client. It does not take ownership: Close closes
// the client, but the caller may also keep using it.
func NewRedis(rdb redis.UniversalClient, opts RedisOptions) *Redis {
	if opts.Prefix == "" {
		opts.Prefix = "sudoku:"
	}
	_, cluster := rdb.(*redis.ClusterClient)
	return &Redis{rdb: rdb, prefix: opts.Prefix, ttl: opts.TTL, cluster: cluster}
}

// Client returns the underlying go-redis client.
func (r *Redis) Client() redis.UniversalClient { return r.rdb }

// Close closes the client.
func (r *Redis) Close() error { return r.rdb.Close() }

// Ping checks that Redis answers.
func (r *Redis) Ping(ctx context.Context) error {
	if err := r.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cache: redis ping: %w", err)
	}
	return nil
}

func (r *Redis) solKey(k string) string    { return r.prefix + "sol:" + k }
func (r *Redis) jobKey(id string) string   { return r.prefix + "job:{" + id + "}" }
func (r *Redis) batchKey(id string) string { return r.prefix + "job:{" + id + "}:batches" }
func (r *Redis) orderKey(id string) string { return r.prefix + "job:{" + id + "}:order" }
func (r *Redis) jobsKey() string           { return r.prefix + "jobs" }

// Get looks keys up in one round trip. The result for a key not in the
// cache is nil.
func (r *Redis) Get(ctx context.Context, keys []string) ([]*result.Result, error) {
	out := make([]*result.Result, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = r.solKey(k)
	}
	vals := make([]any, len(keys))
	if r.cluster {
		cmds := make([]*redis.StringCmd, len(keys))
		_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range full {
				cmds[i] = p.Get(ctx, k)
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("cache: get %d keys: %w", len(keys), err)
		}
		for i, c := range cmds {
			if v, err := c.Result(); err == nil {
				vals[i] = v
			}
		}
	} else {
		var err error
		if vals, err = r.rdb.MGet(ctx, full...).Result(); err != nil {
			return nil, fmt.Errorf("cache: get %d keys: %w", len(keys), err)
		}
	}
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue
		}
		res, err := decodeResult(keys[i], s)
		if err != nil {
			return nil, err
		}
		out[i] = &res
	}
	return out, nil
}

// Put stores results (each with its Key set) in one round trip.
func (r *Redis) Put(ctx context.Context, rs []result.Result) error {
	if len(rs) == 0 {
		return nil
	}
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		r.queuePut(ctx, p, rs)
		return nil
	})
	if err != nil {
		return fmt.Errorf("cache: put %d results: %w", len(rs), err)
	}
	return nil
}

// queuePut adds the commands that store rs to p: one MSET where it can,
// else one SET per key.
func (r *Redis) queuePut(ctx context.Context, p redis.Pipeliner, rs []result.Result) {
	if len(rs) == 0 {
		return // an MSET without arguments is an error
	}
	if r.ttl > 0 || r.cluster {
		for i := range rs {
			p.Set(ctx, r.solKey(rs[i].Key), encodeResult(&rs[i]), r.ttl)
		}
		return
	}
	args := make([]any, 0, 2*len(rs))
	for i := range rs {
		args = append(args, r.solKey(rs[i].Key), encodeResult(&rs[i]))
	}
	p.MSet(ctx, args...)
}

// completeScript marks a batch done and counts its results, once.
// KEYS: job hash, batch bitmap. ARGV: batch index, now (ms), puzzles, then
// status/count pairs. Returns -1 for an unknown job, 0 for a batch already
// counted, 1 when counted, 2 when counted and the job is now finished.
const completeScript = `
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('SETBIT', KEYS[2], ARGV[1], 1) == 1 then return 0 end
local done = redis.call('HINCRBY', KEYS[1], 'done', ARGV[3])
for i = 4, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], 's:' .. ARGV[i], ARGV[i+1]) end
local queued = tonumber(redis.call('HGET', KEYS[1], 'queued') or '0')
if redis.call('HGET', KEYS[1], 'sealed') == '1' and done >= queued then
  redis.call('HSETNX', KEYS[1], 'finished', ARGV[2])
  return 2
end
return 1
`

// sealScript marks a job fully published and finishes it if every batch is
// done. KEYS: job hash. ARGV: now (ms). Returns -1 for an unknown job, 1,
// or 2 when the job is finished.
var sealScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], 'sealed', '1')
local done = tonumber(redis.call('HGET', KEYS[1], 'done') or '0')
local queued = tonumber(redis.call('HGET', KEYS[1], 'queued') or '0')
if done >= queued then
  redis.call('HSETNX', KEYS[1], 'finished', ARGV[1])
  return 2
end
return 1
`)

// CompleteBatch stores the results of batch index of job jobID and counts
// them in the job record, in one round trip. A batch counted before is not
// counted again (its results are written again, unchanged). finished
// reports whether the job is now complete. An empty jobID stores results
// only. A job id with no record is not an error: the results are stored
// and nothing is counted.
func (r *Redis) CompleteBatch(ctx context.Context, jobID string, index uint64, rs []result.Result) (finished bool, err error) {
	var done *redis.Cmd
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		r.queuePut(ctx, p, rs)
		if jobID != "" {
			args := []any{index, time.Now().UnixMilli(), len(rs)}
			for st, n := range statusCounts(rs) {
				args = append(args, string(st), n)
			}
			// EVAL, not EVALSHA: in a pipeline there is no NOSCRIPT retry, and
			// the script is small next to a batch of results.
			done = p.Eval(ctx, completeScript, []string{r.jobKey(jobID), r.batchKey(jobID)}, args...)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("cache: complete batch %d of job %s: %w", index, jobID, err)
	}
	if done != nil {
		n, _ := done.Int()
		return n == 2, nil
	}
	return false, nil
}

// CreateJob creates the record of a new job.
func (r *Redis) CreateJob(ctx context.Context, id string, created time.Time) error {
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, r.jobKey(id), "created", created.UnixMilli(), "total", 0, "queued", 0, "done", 0)
		p.ZAdd(ctx, r.jobsKey(), redis.Z{Score: float64(created.UnixMilli()), Member: id})
		return nil
	})
	if err != nil {
		return fmt.Errorf("cache: create job %s: %w", id, err)
	}
	return nil
}

// AddToJob appends lines to a job and adds to its counters, in one round
// trip. It is not idempotent: a producer calls it once per chunk of input.
func (r *Redis) AddToJob(ctx context.Context, id string, d JobDelta) error {
	order, err := appendOrder(nil, d.Lines)
	if err != nil {
		return err
	}
	_, err = r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if len(order) > 0 {
			p.Append(ctx, r.orderKey(id), string(order))
		}
		k := r.jobKey(id)
		p.HIncrBy(ctx, k, "total", int64(len(d.Lines)))
		if d.Queued != 0 {
			p.HIncrBy(ctx, k, "queued", d.Queued)
		}
		if d.Batches != 0 {
			p.HIncrBy(ctx, k, "batches", d.Batches)
		}
		for st, n := range d.Counts {
			p.HIncrBy(ctx, k, "s:"+string(st), n)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cache: add to job %s: %w", id, err)
	}
	return nil
}

// SealJob records that every batch of the job is published; finished
// reports whether the job is complete already.
func (r *Redis) SealJob(ctx context.Context, id string) (finished bool, err error) {
	n, err := sealScript.Run(ctx, r.rdb, []string{r.jobKey(id)}, time.Now().UnixMilli()).Int()
	if err != nil {
		return false, fmt.Errorf("cache: seal job %s: %w", id, err)
	}
	if n < 0 {
		return false, fmt.Errorf("%w: %s", ErrJobNotFound, id)
	}
	return n == 2, nil
}

// Job returns the record of a job.
func (r *Redis) Job(ctx context.Context, id string) (Job, error) {
	m, err := r.rdb.HGetAll(ctx, r.jobKey(id)).Result()
	if err != nil {
		return Job{}, fmt.Errorf("cache: job %s: %w", id, err)
	}
	if len(m) == 0 {
		return Job{}, fmt.Errorf("%w: %s", ErrJobNotFound, id)
	}
	return parseJob(id, m), nil
}

func parseJob(id string, m map[string]string) Job {
	j := Job{ID: id, Counts: map[result.Status]int64{}}
	num := func(k string) int64 { n, _ := strconv.ParseInt(m[k], 10, 64); return n }
	j.Total, j.Queued, j.Done, j.Batches = num("total"), num("queued"), num("done"), num("batches")
	j.Sealed = m["sealed"] == "1"
	j.Created = time.UnixMilli(num("created"))
	if f := num("finished"); f > 0 {
		j.Finished = time.UnixMilli(f)
	}
	for k, v := range m {
		if st, ok := strings.CutPrefix(k, "s:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			j.Counts[result.Status(st)] = n
		}
	}
	return j
}

// Jobs returns the records of the newest jobs, newest first.
func (r *Redis) Jobs(ctx context.Context, limit int) ([]Job, error) {
	ids, err := r.rdb.ZRevRange(ctx, r.jobsKey(), 0, int64(limit)-1).Result()
	if err != nil {
		return nil, fmt.Errorf("cache: list jobs: %w", err)
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, r.jobKey(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cache: list jobs: %w", err)
	}
	jobs := make([]Job, 0, len(ids))
	for i, c := range cmds {
		if m := c.Val(); len(m) > 0 {
			jobs = append(jobs, parseJob(ids[i], m))
		}
	}
	return jobs, nil
}

// Order returns up to n lines of a job from line index from (0-based, in
// input order).
func (r *Redis) Order(ctx context.Context, id string, from, n int64) ([]OrderEntry, error) {
	s, err := r.rdb.GetRange(ctx, r.orderKey(id), from*orderEntrySize, (from+n)*orderEntrySize-1).Result()
	if err != nil {
		return nil, fmt.Errorf("cache: order of job %s: %w", id, err)
	}
	return parseOrder([]byte(s)), nil
}
