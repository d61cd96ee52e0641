// Package job owns every wire contract of a bulk job: the batches that
// carry its puzzles to the workers and its results back, the manifest
// that lets each side check a batch against what the producer published,
// the job's record, and the compact form of one result (which the cache
// stores too). It encodes and decodes; where JetStream keeps each thing is
// internal/queue's, and Store reads and writes the records and manifests.
//
// # Storage seam
//
// Store keeps its records and manifests in a Bucket: the few operations
// of a key-value bucket the job logic needs (Get, Latest, Create, Update
// at a revision, Put, Purge, RemoveTree, Values, Replicated), with the
// compare-and-set on revisions that Store.Apply's loop relies on.
// KVBucket is the JetStream key-value bucket of a deployment (NewStore);
// MemBucket keeps the bucket in memory (NewMemStore), so that the
// producer's, the workers' and this package's job logic is tested without
// servers. One contract suite (bucket_test.go) runs on both, the
// JetStream one on the embedded and the shared server, so that the one in
// memory is shown to behave as the real one: revisions, conflicts,
// misses, purges.
//
// # Items
//
// A job is a sequence of items, one per puzzle line of its input, numbered
// from 0 in input order. A batch is a run of consecutive items; batch i of
// a job holds the items after those of batches 0..i-1. Each item is one of:
//
//   - Solve: a puzzle for a worker, as its givens (the sparse form) or as
//     a packed grid (AppendPacked), whichever is shorter;
//   - Result: a result already known (found in the cache, or an input
//     that is not a puzzle), in the compact form (AppendOutcome);
//   - Repeat: the same puzzle as the item Back items earlier (1 <= Back <=
//     RepeatWindow), whose result the reader already has.
//
// A worker turns every Solve item into a Result item and copies the others
// as they are, so a results batch holds only Result and Repeat items.
//
// # Batch encoding (work: version 3; results: version 1)
//
//	byte     version
//	uvarint  flags (FlagNoLookup, FlagFirstSolution, FlagJSONResults)
//	uvarint  length of the job id, then the job id (1-MaxJobID bytes)
//	uvarint  batch index
//	uvarint  index of the first item
//	uvarint  number of items n (1-MaxBatch)
//	16 bytes the digest of the work batch (results batches only)
//	n times: uvarint line delta (the item's input line minus the previous
//	         item's, the first one's minus 0), byte kind, then by kind:
//	         Solve: kind 4 (sparse) and, for a puzzle of up to
//	         MaxSparseGivens givens, 11 bytes givens mask (bit i: cell i
//	         given) and each given's digit in a nibble (high nibble first,
//	         a spare low nibble 0), or kind 1 and the 41-byte packed grid
//	         of a fuller one; Repeat: uvarint Back; Result: the compact
//	         outcome
//
// Work of version 2 (every puzzle packed, kind 1) still decodes.
//
// # Compact outcome
//
//	byte     status code (see codes below), bit 7 set when from the cache
//	uvarint  guesses
//	unique, solved, multiple: 11 bytes givens mask (bit i: cell i given),
//	         41 bytes packed solution (the puzzle is the solution's digits
//	         at the givens)
//	none:    41 bytes packed puzzle
//	gave_up: 41 bytes packed puzzle, uvarint length + the error
//	invalid: uvarint length + the input text, uvarint length + the error
//
// # Digest
//
// The digest of a batch is the first 16 bytes of the SHA-256 of the job
// id, the batch index, the first item's index, the item count, the
// FlagFirstSolution bit (a byte, 0 or 2) and, per item, its line delta and
// its input: the packed puzzle (of a Solve item,
// or the puzzle of a Result), the text of an invalid input, or the Back of
// a Repeat. A results batch has the same digest as the work batch it
// answers (a reader sets FlagFirstSolution from the job's options before
// computing it: the JSON form has no flags), and the manifest holds each published batch's digest: a worker
// refuses a work batch, and a reader a results batch, that does not match.
package job
