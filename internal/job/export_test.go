package job

import "context"

// LeaderGet exposes leaderGet to the tests of package job_test.
func (s *Store) LeaderGet(ctx context.Context, key string) ([]byte, uint64, error) {
	return s.leaderGet(ctx, key)
}
