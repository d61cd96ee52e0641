package cache

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
)

// Redis is the cache in Redis. It is safe for concurrent use.
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

// NewRedis wraps a go-redis client. Close closes the client.
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
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// Key returns the Redis key of the outcome of the puzzle with key k: the
// prefix, "s2:" (the second form of values) and the first half of the key
// in hex. With the default prefix that is 42 bytes, within the 44 that
// Redis keeps in one allocation with its object; 128 bits tell puzzles
// apart, and a value holds its puzzle, which readers compare.
func (r *Redis) Key(k job.Key) string { return r.keys(1, func(int) *job.Key { return &k })[0] }

// Pattern matches the Redis key of every outcome the cache holds (for
// SCAN).
func (r *Redis) Pattern() string { return r.prefix + keySpace + "*" }

// keySpace follows the prefix in every key: the form of the values
// (job.AppendCacheValue). Values of the first form, under "sol:" and the
// whole key, are left to Redis's eviction.
const keySpace = "s2:"

// keyBytes is how much of a puzzle's key its Redis key holds.
const keyBytes = 16

// keys returns the Redis keys of n puzzle keys, key(i) the i-th, as
// substrings of one string: a batch's keys take two allocations.
func (r *Redis) keys(n int, key func(i int) *job.Key) []string {
	size := len(r.prefix) + len(keySpace) + 2*keyBytes
	b := make([]byte, 0, n*size)
	for i := range n {
		b = append(append(b, r.prefix...), keySpace...)
		b = hex.AppendEncode(b, key(i)[:keyBytes])
	}
	all, out := string(b), make([]string, n)
	for i := range out {
		out[i] = all[i*size : (i+1)*size]
	}
	return out
}

// Get looks keys up in one round trip (pipelined GETs on a Cluster). A
// value that does not decode is a miss.
func (r *Redis) Get(ctx context.Context, keys []job.Key) ([]*job.Outcome, error) {
	out := make([]*job.Outcome, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	vals := make([]any, len(keys))
	full := r.keys(len(keys), func(i int) *job.Key { return &keys[i] })
	if r.cluster {
		cmds := make([]*redis.StringCmd, len(keys))
		_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range keys {
				cmds[i] = p.Get(ctx, full[i])
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("redis: get %d keys: %w", len(keys), err)
		}
		for i, c := range cmds {
			if v, err := c.Result(); err == nil {
				vals[i] = v
			}
		}
	} else {
		var err error
		if vals, err = r.rdb.MGet(ctx, full...).Result(); err != nil {
			return nil, fmt.Errorf("redis: get %d keys: %w", len(keys), err)
		}
	}
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue
		}
		o, err := job.DecodeCacheValue([]byte(s))
		if err != nil || !cacheable(&o) || job.KeyOf(&o.Puzzle) != keys[i] {
			// Another version's value, garbage, or (the Redis key holding
			// half of the puzzle's) another puzzle's: a miss.
			continue
		}
		out[i] = &o
	}
	return out, nil
}

// Put stores the entries that are answers in one round trip: one MSET on
// a single server without a TTL, else a SET per key.
func (r *Redis) Put(ctx context.Context, entries []Entry) error {
	keep := make([]*Entry, 0, len(entries))
	for i := range entries {
		if cacheable(entries[i].Outcome) {
			keep = append(keep, &entries[i])
		}
	}
	if len(keep) == 0 {
		return nil
	}
	full := r.keys(len(keep), func(i int) *job.Key { return &keep[i].Key })
	// Pointers go into an interface without an allocation, where a
	// string or a slice takes one each.
	vals := make([]value, len(keep))
	for i, e := range keep {
		vals[i] = e.value()
	}
	var err error
	if r.ttl > 0 || r.cluster {
		_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range keep {
				p.Set(ctx, full[i], &vals[i], r.ttl)
			}
			return nil
		})
	} else {
		// MSET's arguments only for MSET: the pipeline above passes
		// each pair itself.
		args := make([]any, 0, 2*len(keep))
		for i := range keep {
			args = append(args, &full[i], &vals[i])
		}
		err = r.rdb.MSet(ctx, args...).Err()
	}
	if err != nil {
		return fmt.Errorf("redis: put %d results: %w", len(keep), err)
	}
	return nil
}

// value is a cache value as a command argument: go-redis writes a
// *value's bytes through MarshalBinary.
type value []byte

// MarshalBinary returns v's bytes.
func (v *value) MarshalBinary() ([]byte, error) { return *v, nil }
