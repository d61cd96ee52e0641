// Package roles defines who may do what on the NATS and Redis servers of a
// deployment: five roles (admin, producer, gateway, worker, reader), the
// NATS publish and subscribe permissions of each user, the Redis ACL
// rules of each, the server configuration files that grant them (Init
// writes them with a random password per user), and the errors that say
// which user was refused what.
//
// # Roles
//
//   - admin: everything an operator does: create and change the streams
//     and the jobs bucket, `job rm` of anyone's job, `dlq replay`, flush
//     the cache. It may not publish on $JS.EVENT.> (only the server does),
//     nor subscribe to the micro service's request subjects (only workers
//     answer them).
//   - producer: submit jobs of its own and follow, cancel and remove
//     them, and nothing of anyone else's: every subject and key of a job
//     carries its owner's name (internal/queue), and a producer user's
//     permissions name its own. Whether it may read other producers' jobs
//     is InitOptions.SharedReads (default no). Read the cache.
//   - gateway: a producer that acts for others, the HTTP API (`sudoku
//     serve`) with a token per principal: it may submit and follow any
//     owner's jobs, and checks itself that each caller touches only its
//     own.
//   - worker: pull and ack work, publish results, dead letters and events,
//     answer the micro service's endpoints (solve, submit, status, cancel
//     and $SRV.>), watch the max-deliveries advisories; read the cache
//     and write its keys. It may not delete stored results.
//   - reader: read streams, records, results and dead letters, ask the
//     solve and status endpoints, follow events: dashboards, `get`, `job
//     status`, a read-only HTTP API; read the cache.
//
// A user's role is its name, or the part of its name before the first '-'
// ("producer-berlin" is a producer), so that each machine or person can
// have a credential of its own. A user's name is also the owner of the
// jobs it submits.
package roles

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
)

// Role is one of the four roles.
type Role string

// The roles.
const (
	Admin    Role = "admin"
	Producer Role = "producer"
	Gateway  Role = "gateway"
	Worker   Role = "worker"
	Reader   Role = "reader"
)

// All lists every role, in the order the configuration files give them.
var All = []Role{Admin, Producer, Gateway, Worker, Reader}

// ActsForOthers reports whether a user of role r may act on jobs of other
// owners than itself: read them (admin, gateway, reader) and cancel or
// remove them (admin, gateway: the gateway on behalf of the principal it
// checked). The micro service's endpoints and the HTTP API ask it.
func (r Role) ActsForOthers() bool { return r == Admin || r == Gateway || r == Reader }

// ReadsBySequence reports whether NATS lets user read the jobs bucket by
// STREAM.MSG.GET (no key named): an admin, a worker or a reader, or a
// user of no role (none of this package's permissions applies to it). The job store
// asks it (job.ReadsBySequence) before it asks a bucket's leader.
func ReadsBySequence(user string) bool {
	r, ok := Of(user)
	return !ok || r == Admin || r == Worker || r == Reader
}

func init() { job.ReadsBySequence = ReadsBySequence }

// Writes reports whether a user of role r may change jobs it does not
// own (cancel, remove).
func (r Role) Writes() bool { return r == Admin || r == Gateway }

// Of returns the role of the user name user: the name itself when it is a
// role's, else the part before its first '-'. ok is false when neither
// names a role.
func Of(user string) (r Role, ok bool) {
	name, _, _ := strings.Cut(user, "-")
	r = Role(name)
	return r, slices.Contains(All, r)
}

// CheckUser returns an error unless user is a usable user name: a role's
// name, or one followed by '-' and letters, digits, '_' or '-' (a job
// owner's name, job.CheckOwner).
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

// readStreams are the JetStream API subjects that read the streams given,
// whole: their info, their messages (by sequence, by subject, directly
// from any replica) and the ephemeral (ordered) consumers that read them
// in order, with the flow control their push form answers.
func readStreams(streams ...string) []string {
	var s []string
	s = append(s, api("STREAM.INFO", "", streams...)...)
	s = append(s, api("STREAM.MSG.GET", "", streams...)...)
	s = append(s, api("DIRECT.GET", "", streams...)...)
	s = append(s, api("DIRECT.GET", ".>", streams...)...)
	s = append(s, api("CONSUMER.CREATE", ".>", streams...)...)
	s = append(s, consumerUse(streams...)...)
	return s
}

// readSubjects are the JetStream API subjects that read the messages of
// stream on the subjects filter matches, and no other: a direct get by
// subject, and ordered consumers whose filter is within filter (the
// filter is a token of the create request's subject, which nats.go
// sends whenever a consumer has one filter). Reading by sequence
// (STREAM.MSG.GET, DIRECT.GET without a subject) names no subject, and
// is not granted.
func readSubjects(stream, filter string) []string {
	return []string{
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.DIRECT.GET." + stream + "." + filter,
		"$JS.API.CONSUMER.CREATE." + stream + ".*." + filter,
	}
}

// consumerUse are the JetStream API subjects that use the consumers of
// the streams given once created (look up, pull, delete, flow control):
// an ordered consumer's name is its reader's secret, made at random.
func consumerUse(streams ...string) []string {
	var s []string
	s = append(s, api("CONSUMER.INFO", ".>", streams...)...)
	s = append(s, api("CONSUMER.DELETE", ".>", streams...)...)
	s = append(s, api("CONSUMER.MSG.NEXT", ".*", streams...)...)
	for _, st := range streams {
		s = append(s, "$JS.FC."+st+".>")
	}
	return s
}

// jobConsumers are the JetStream API subjects that manage the work
// stream's consumers (one per lane): create, look up, list and delete.
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

// endpoints are the micro service's request subjects a user acting as
// owner may ask ("*" for any owner): its own submit, status and cancel,
// and solve.
func endpoints(p, owner string) []string {
	return []string{p + ".solve", p + ".submit." + owner, p + ".status." + owner, p + ".cancel." + owner, "$SRV.>"}
}

// NATS returns the NATS permissions of user (its role is roles.Of) in a
// deployment named n. A producer's are those of its own jobs: the
// subjects and keys that start with its name (internal/queue); with
// shared, it may read every producer's jobs too (their records and
// results), never change them.
func NATS(user string, n Names, shared bool) Permissions {
	r, _ := Of(user)
	kv := "KV_" + n.Bucket
	p := n.Prefix
	inbox := []string{"_INBOX.>"}
	// The JetStream API a process uses to set itself up and read the
	// streams' state (queue.Setup, the lanes' sizes, where results start).
	info := api("STREAM.INFO", "", n.Stream, n.Results, n.DLQ, kv)
	switch r {
	case Admin:
		return Permissions{
			Publish:     []string{">"},
			DenyPublish: []string{"$JS.EVENT.>"},
			Subscribe:   []string{">"},
			// Only workers answer the service: an admin's "nats sub >"
			// must not see a request it could answer.
			DenySubscribe: []string{p + ".solve", p + ".submit.>", p + ".status.>", p + ".cancel.>"},
		}
	case Producer, Gateway:
		owner, reads := user, user
		if r == Gateway {
			owner, reads = "*", "*"
		}
		if shared {
			reads = "*"
		}
		pub := []string{
			p + ".jobs." + owner + ".>",            // work, in its lanes
			p + ".results." + owner + ".>",         // results of batches it answers itself
			"$KV." + n.Bucket + "." + owner + ".>", // its records and manifests
		}
		pub = append(pub, endpoints(p, owner)...)
		pub = append(pub, info...)
		if r == Gateway {
			// The dashboard's figures: the lanes' consumers.
			pub = append(pub, "$JS.API.CONSUMER.INFO."+n.Stream+".>", "$JS.API.CONSUMER.NAMES."+n.Stream,
				"$JS.API.CONSUMER.LIST."+n.Stream)
		}
		pub = append(pub, readSubjects(kv, "$KV."+n.Bucket+"."+reads+".>")...)
		pub = append(pub, readSubjects(n.Results, p+".results."+reads+".>")...)
		pub = append(pub, consumerUse(n.Results, kv)...)
		events := []string{p + ".events." + reads + ".>"}
		if r == Gateway {
			events = []string{p + ".events.>"} // the solve endpoint's too
		}
		return Permissions{Publish: pub, Subscribe: append(inbox, events...)}
	case Worker:
		pub := []string{
			"$JS.API.CONSUMER.MSG.NEXT." + n.Stream + ".*", // pull work
			"$JS.ACK." + n.Stream + ".>",                   // ack, nak, in progress, term
			// A message given up (max deliveries) is read, dead-lettered
			// and deleted.
			"$JS.API.STREAM.MSG.GET." + n.Stream, "$JS.API.DIRECT.GET." + n.Stream,
			"$JS.API.STREAM.MSG.DELETE." + n.Stream,
			p + ".results.>", p + ".dlq.*", p + ".events.>",
			p + ".jobs.>",            // the service's submit endpoint, for any owner
			"$KV." + n.Bucket + ".>", // job records
		}
		pub = append(pub, info...)
		pub = append(pub, jobConsumers(n.Stream)...)
		pub = append(pub, readStreams(n.Results, kv)...)
		return Permissions{
			Publish: pub,
			Subscribe: append(inbox,
				p+".solve", p+".submit.*", p+".status.*", p+".cancel.*", "$SRV.>",
				"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."+n.Stream+".>"),
			AllowResponses: true,
		}
	case Reader:
		pub := []string{p + ".solve", p + ".status." + user, "$SRV.>",
			"$JS.API.CONSUMER.INFO." + n.Stream + ".>",
			"$JS.API.CONSUMER.NAMES." + n.Stream,
			"$JS.API.CONSUMER.LIST." + n.Stream,
		}
		pub = append(pub, info...)
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
