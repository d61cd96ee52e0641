package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
)

// Attribute keys of the service's spans: OpenTelemetry's messaging
// semantic conventions, and the service's own under "sudoku.".
const (
	MessagingSystem        = attribute.Key("messaging.system")
	MessagingOperationType = attribute.Key("messaging.operation.type")
	MessagingOperationName = attribute.Key("messaging.operation.name")
	MessagingDestTemplate  = attribute.Key("messaging.destination.template")
	MessagingConsumerGroup = attribute.Key("messaging.consumer.group.name")
	MessagingBatchCount    = attribute.Key("messaging.batch.message_count")
	MessagingMessageID     = attribute.Key("messaging.message.id")
	MessagingBodySize      = attribute.Key("messaging.message.body.size")
	MessagingDeliveryCount = attribute.Key("messaging.nats.delivery_count")

	// JobID is the job's id ("owner.serial").
	JobID = attribute.Key("sudoku.job.id")
	// JobOwner is the job's owner.
	JobOwner = attribute.Key("sudoku.job.owner")
	// JobState is the state of a job's record.
	JobState = attribute.Key("sudoku.job.state")
	// JobLines is the number of lines a submit read.
	JobLines = attribute.Key("sudoku.job.lines")
	// BatchIndex is the index of a batch in its job.
	BatchIndex = attribute.Key("sudoku.batch.index")
	// BatchPuzzles is the number of puzzles of a batch.
	BatchPuzzles = attribute.Key("sudoku.batch.puzzles")
	// CacheHits is the number of puzzles a lookup found in the cache.
	CacheHits = attribute.Key("sudoku.cache.hits")
	// Outcome is how a worker's batch ended (acked, nak, dead_letter...).
	Outcome = attribute.Key("sudoku.batch.outcome")
)

// NATS is the messaging.system attribute of every messaging span.
var NATS = MessagingSystem.String("nats")
