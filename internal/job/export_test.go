package job

import "context"

// LeaderGet exposes leaderGet to the tests of package job_test.
func (s *Store) LeaderGet(ctx context.Context, key string) ([]byte, uint64, error) {
	return s.b.(*KVBucket).leaderGet(ctx, key)
}

// Replicated exposes replicated to the tests of package job_test.
func (s *Store) Replicated(ctx context.Context) bool { return s.replicated(ctx) }
