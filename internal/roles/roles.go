// Package roles defines who may do what on the NATS and Redis servers of a
// deployment: four roles (admin, producer, worker, reader), the NATS
// publish and subscribe permissions and the Redis ACL rules of each, the
// server configuration files that grant them (Init writes them with a
// random password per user), and the errors that say which user was
// refused what.
//
// # Roles
//
//   - admin: everything an operator does: create and change the streams
//     and the jobs bucket, `job rm`, `dlq replay`, flush the cache. It may
//     not publish on $JS.EVENT.> (only the server does), nor subscribe to
//     the micro service's request subjects (only workers answer them).
//   - producer: submit jobs (work batches, job records, manifests, the
//     results of batches answered from the cache), create and delete a
//     job's consumer on the work stream, read results and statuses, ask
//     the micro service; read the cache.
//   - worker: pull and ack work, publish results, dead letters and events,
//     answer the micro service's endpoints (solve, submit, status, and
//     $SRV.>), watch the max-deliveries advisories; read the cache and
//     write its keys.
//   - reader: read streams, records, results and dead letters, ask the
//     solve and status endpoints, follow events: dashboards, `get`, `job
//     status`, a read-only HTTP API; read the cache.
//
// A user's role is its name, or the part of its name before the first '-'
// ("producer-berlin" is a producer), so that each machine can have a
// credential of its own.
package roles

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// Role is one of the four roles.
type Role string

// The roles.
const (
	Admin    Role = "admin"
	Producer Role = "producer"
	Worker   Role = "worker"
	Reader   Role = "reader"
)

// All lists every role, in the order the configuration files give them.
var All = []Role{Admin, Producer, Worker, Reader}

// Of returns the role of the user name user: the name itself when it is a
// role's, else the part before its first '-'. ok is false when neither
// names a role.
func Of(user string) (r Role, ok bool) {
	name, _, _ := strings.Cut(user, "-")
	r = Role(name)
	return r, slices.Contains(All, r)
}

// CheckUser returns an error unless user is a usable user name: a role's
// name, or one followed by '-' and letters, digits, '_' or '-'.
func CheckUser(user string) error {
	if _, ok := Of(user); !ok {
		return fmt.Errorf("roles: user %q: the name must be a role (admin, producer, worker, reader) or start with one and '-'", user)
	}
	for _, c := range user {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("roles: user %q: only letters, digits, '_' and '-' are allowed", user)
		}
	}
	return nil
}

// Names are the names of what a deployment keeps in NATS and Redis, from
// which the permissions are made.
type Names struct {
	// Stream, Results and DLQ are the work, results and dead-letter
	// streams; Bucket is the jobs bucket (its stream is "KV_"+Bucket).
	Stream, Results, DLQ, Bucket string
	// Prefix starts every subject of the service ("sudoku").
	Prefix string
	// KeyPrefix starts every Redis key of the cache ("sudoku:").
	KeyPrefix string
}

// NamesOf returns the names a deployment with queue options o and Redis
// key prefix keyPrefix uses.
func NamesOf(o queue.Options, keyPrefix string) Names {
	// The same defaults as queue.Options's.
	return Names{
		Stream:    cmp.Or(o.Stream, "SUDOKU"),
		Results:   o.ResultsStream(),
		DLQ:       cmp.Or(o.DLQStream, "SUDOKU_DLQ"),
		Bucket:    o.JobsBucket(),
		Prefix:    cmp.Or(o.Prefix, "sudoku"),
		KeyPrefix: cmp.Or(keyPrefix, "sudoku:"),
	}
}

// Permissions are a NATS user's: the subjects it may publish and subscribe
// to (Allow) and those it may not even when an Allow wildcard covers them
// (Deny). AllowResponses lets it publish one reply to each request it
// receives, whatever the reply subject (the micro service's answers).
type Permissions struct {
	Publish, DenyPublish     []string
	Subscribe, DenySubscribe []string
	AllowResponses           bool
}

// api returns the JetStream API subjects of verb on each stream
// ("STREAM.INFO" gives $JS.API.STREAM.INFO.<stream>), with suffix after
// each (".>" for a consumer's name and filter, "" for none).
func api(verb, suffix string, streams ...string) []string {
	out := make([]string, 0, len(streams))
	for _, s := range streams {
		out = append(out, "$JS.API."+verb+"."+s+suffix)
	}
	return out
}

// readStreams are the JetStream API subjects that read the streams given:
// their info, their messages (by sequence, by subject, directly from any
// replica) and the ephemeral (ordered) consumers that read them in order,
// with the flow control their push form answers.
func readStreams(streams ...string) []string {
	var s []string
	s = append(s, api("STREAM.INFO", "", streams...)...)
	s = append(s, api("STREAM.MSG.GET", "", streams...)...)
	s = append(s, api("DIRECT.GET", "", streams...)...)
	s = append(s, api("DIRECT.GET", ".>", streams...)...)
	s = append(s, api("CONSUMER.CREATE", ".>", streams...)...)
	s = append(s, api("CONSUMER.INFO", ".>", streams...)...)
	s = append(s, api("CONSUMER.DELETE", ".>", streams...)...)
	s = append(s, api("CONSUMER.MSG.NEXT", ".*", streams...)...)
	for _, st := range streams {
		s = append(s, "$JS.FC."+st+".>")
	}
	return s
}

// jobConsumers are the JetStream API subjects that manage the work
// stream's consumers (one per job): create, look up, list and delete.
// They read no message (CONSUMER.MSG.NEXT does).
func jobConsumers(stream string) []string {
	return []string{
		"$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.INFO." + stream + ".>",
		"$JS.API.CONSUMER.DELETE." + stream + ".>",
		"$JS.API.CONSUMER.NAMES." + stream,
		"$JS.API.CONSUMER.LIST." + stream,
	}
}

// NATS returns the NATS permissions of role r in a deployment named n.
func NATS(r Role, n Names) Permissions {
	kv := "KV_" + n.Bucket
	p := n.Prefix
	inbox := []string{"_INBOX.>"}
	switch r {
	case Admin:
		return Permissions{
			Publish:     []string{">"},
			DenyPublish: []string{"$JS.EVENT.>"},
			Subscribe:   []string{">"},
			// Only workers answer the service: an admin's "nats sub >"
			// must not see a request it could answer.
			DenySubscribe: []string{p + ".solve", p + ".submit", p + ".status", p + ".cancel"},
		}
	case Producer:
		pub := []string{
			p + ".jobs.bulk.*",                                        // work batches
			p + ".results.*.*",                                        // results of batches answered from the cache
			"$KV." + n.Bucket + ".>",                                  // job records and manifests
			p + ".submit", p + ".solve", p + ".status", p + ".cancel", // the micro service, as a client
			"$SRV.>",
			"$JS.API.STREAM.INFO." + n.Stream, "$JS.API.STREAM.INFO." + n.DLQ,
		}
		pub = append(pub, jobConsumers(n.Stream)...)
		pub = append(pub, readStreams(n.Results, kv)...)
		return Permissions{Publish: pub, Subscribe: append(inbox, p+".events.>")}
	case Worker:
		pub := []string{
			"$JS.API.CONSUMER.MSG.NEXT." + n.Stream + ".*", // pull work
			"$JS.ACK." + n.Stream + ".>",                   // ack, nak, in progress, term
			// A message given up (max deliveries) is read, dead-lettered
			// and deleted.
			"$JS.API.STREAM.MSG.GET." + n.Stream, "$JS.API.DIRECT.GET." + n.Stream,
			"$JS.API.STREAM.MSG.DELETE." + n.Stream,
			// A results subject that holds what does not answer its batch
			// is cleared.
			"$JS.API.STREAM.MSG.DELETE." + n.Results,
			p + ".results.*.*", p + ".dlq.*", p + ".events.*",
			p + ".jobs.bulk.*",       // the service's submit endpoint
			"$KV." + n.Bucket + ".>", // its job records
			"$JS.API.STREAM.INFO." + n.Stream, "$JS.API.STREAM.INFO." + n.DLQ,
		}
		pub = append(pub, jobConsumers(n.Stream)...)
		pub = append(pub, readStreams(n.Results, kv)...)
		return Permissions{
			Publish: pub,
			Subscribe: append(inbox,
				p+".solve", p+".submit", p+".status", p+".cancel", "$SRV.>",
				"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."+n.Stream+".>"),
			AllowResponses: true,
		}
	case Reader:
		pub := []string{
			p + ".solve", p + ".status", "$SRV.>",
			"$JS.API.STREAM.INFO." + n.Stream,
			"$JS.API.CONSUMER.INFO." + n.Stream + ".>",
			"$JS.API.CONSUMER.NAMES." + n.Stream,
			"$JS.API.CONSUMER.LIST." + n.Stream,
		}
		pub = append(pub, readStreams(n.Results, kv, n.DLQ)...)
		return Permissions{Publish: pub, Subscribe: append(inbox, p+".events.>")}
	}
	return Permissions{}
}

// Redis returns the Redis ACL rules of role r in a deployment named n
// (what follows "user NAME on >password" in an ACL file). No role but
// admin may run anything beyond the cache's reads (and, for workers,
// writes) on the cache's keys: no FLUSHALL, CONFIG, KEYS or DEL.
func Redis(r Role, n Names) []string {
	if r == Admin {
		return []string{"~*", "&*", "+@all"}
	}
	// The connection's own commands (go-redis sends HELLO, and SELECT for
	// a database other than 0; it goes on when CLIENT SETINFO, which Redis
	// 7.0 does not know, is refused) and a cluster's topology. Each
	// command is one Redis 6.2 and later know.
	rules := []string{"resetkeys", "~" + n.KeyPrefix + "*", "resetchannels", "-@all",
		"+ping", "+hello", "+auth", "+select", "+command", "+cluster|slots", "+cluster|nodes", "+readonly",
		"+get", "+mget"}
	if r == Worker {
		// The cache's keys only (internal/cache: KeyPrefix + "s2:" + hex).
		rules[1] = "~" + n.KeyPrefix + "s2:*"
		rules = append(rules, "+set", "+mset")
	}
	return rules
}
