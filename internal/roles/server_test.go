package roles_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/redis/go-redis/v9"

	"github.com/sudoku-queue/sudoku-queue/internal/app"
	"github.com/sudoku-queue/sudoku-queue/internal/cache"
	"github.com/sudoku-queue/sudoku-queue/internal/config"
	"github.com/sudoku-queue/sudoku-queue/internal/job"
	"github.com/sudoku-queue/sudoku-queue/internal/queue"
	"github.com/sudoku-queue/sudoku-queue/internal/roles"
	"github.com/sudoku-queue/sudoku-queue/internal/testenv"
	"github.com/sudoku-queue/sudoku-queue/solver"
)

// deployment is a NATS server and a Redis started with the files of a
// roles folder, and the users of that folder.
type deployment struct {
	dir       string // the roles folder
	natsURL   string
	redisAddr string
	users     map[string]roles.User
	opts      queue.Options
}

// Names every test uses: the defaults, as a deployment has them.
var (
	opts  = queue.Options{Replicas: 1, Memory: true}
	names = roles.NamesOf(opts, "sudoku:")
	// jobID is producer-berlin's job, lane its lane.
	jobID  = "producer-berlin.06h3ehrn6pfq43m40lru4u8gf0"
	lane   = queue.Lane{Owner: "producer-berlin", Priority: job.PriorityNormal, Slot: queue.SlotSmall}
	cacheK = job.Key{1, 2, 3}
	// otherID is producer-bob's job, in otherLane, whose consumer allowed
	// leaves in place.
	otherID   = "producer-bob.0j2"
	otherLane = queue.Lane{Owner: "producer-bob", Priority: job.PriorityHigh, Slot: queue.BigSlot(0)}
	otherJob  = opts.LaneConsumer(otherLane)
)

// deploy writes a roles folder and starts a private Redis with its ACL
// file and a NATS server with its configuration: the nats-server module
// in the process ("embedded") or the Debian binary ("nats-server").
func deploy(t *testing.T, kind string) *deployment {
	t.Helper()
	dir := t.TempDir()
	us, err := roles.Init(dir, names, roles.InitOptions{Users: []string{"producer-berlin", "producer-bob"}, Owner: -1})
	if err != nil {
		t.Fatal(err)
	}
	d := &deployment{dir: dir, users: map[string]roles.User{}, opts: opts}
	for _, u := range us {
		d.users[u.Name] = u
	}
	conf := filepath.Join(dir, roles.ServerDir, roles.NATSConfFile)
	switch kind {
	case "embedded":
		so, err := server.ProcessConfigFile(conf)
		if err != nil {
			t.Fatalf("the nats-server module refuses %s: %v", conf, err)
		}
		so.Host, so.Port, so.JetStream, so.StoreDir, so.NoLog, so.NoSigs = "127.0.0.1", server.RANDOM_PORT, true, t.TempDir(), true, true
		// In this process, under the race detector on a busy machine, the
		// server's bcrypt check of a client's password can outlast its
		// first PING to that client (sent after 2 s by default), which the
		// client, still awaiting the PONG of its CONNECT, takes for a
		// protocol error: the first PING comes at the ping interval.
		so.DisableShortFirstPing = true
		ns, err := server.NewServer(so)
		if err != nil {
			t.Fatal(err)
		}
		go ns.Start()
		if !ns.ReadyForConnections(10 * time.Second) {
			t.Fatal("embedded nats-server not ready")
		}
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		d.natsURL = ns.ClientURL()
	case "nats-server":
		d.natsURL = testenv.NATSServer(t, "-c", conf).URL()
	}
	d.redisAddr = testenv.RedisServer(t, "--aclfile", filepath.Join(dir, roles.ServerDir, roles.RedisACLFile)).Addr
	return d
}

// client is one user's connections, as a sudoku process makes them
// (internal/app): its NATS refusals recorded, its Redis NOPERMs named.
type client struct {
	user string
	nc   *nats.Conn
	js   jetstream.JetStream
	ref  *roles.Refusals
	rdb  redis.UniversalClient
}

func (d *deployment) connect(t *testing.T, user string) *client {
	t.Helper()
	u, ok := d.users[user]
	if !ok {
		t.Fatalf("no user %s", user)
	}
	c := &client{user: user, ref: roles.NewRefusals(user)}
	var err error
	// A generous connect timeout: the server checks a bcrypt hash at each
	// connection, slow under the race detector on a busy machine.
	// Tried three times: a server slower to check the hash than its
	// first PING to a new client ("expected 'PONG', got 'PING'") fails
	// a connection that the next attempt makes.
	for try := 0; try < 3; try++ {
		c.nc, err = nats.Connect(d.natsURL, nats.UserInfo(user, u.NATSPassword), nats.Timeout(30*time.Second),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { c.ref.Note(err) }))
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(c.nc.Close)
	if c.js, err = jetstream.New(c.nc); err != nil {
		t.Fatal(err)
	}
	if c.rdb, err = app.RedisClient(config.RedisConfig{Addrs: []string{d.redisAddr}, Username: user,
		Password: config.Secret(u.RedisPassword), DialTimeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.rdb.Close() })
	return c
}

// setup is queue.Setup as each role's processes call it: workers with
// Update (they find everything as wanted and change nothing), producers
// and readers without the workers' consumer.
func (c *client) setup(ctx context.Context, update, noConsumer bool) (*queue.Queue, error) {
	o := opts
	o.Update, o.NoConsumer = update, noConsumer
	q, err := queue.Setup(ctx, c.js, o)
	if err != nil {
		return nil, err
	}
	q.Refusals = c.ref // as app.Open sets it
	return q, nil
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestRoles runs, on private servers set up with the files `sudoku roles
// init` writes, what each role does (all of it must work), then a table of
// what each must not do (each must be refused, by the server, naming the
// user), and checks that nothing refused changed anything.
func TestRoles(t *testing.T) {
	for _, kind := range []string{"embedded", "nats-server"} {
		t.Run(kind, func(t *testing.T) {
			d := deploy(t, kind)
			allowed(t, d)
			forbidden(t, d)
		})
	}
}

// allowed runs each role's operations in the order of a job's life; each
// must succeed.
func allowed(t *testing.T, d *deployment) {
	ctx := ctx10(t)
	admin, producer, bob, worker, reader := d.connect(t, "admin"), d.connect(t, "producer-berlin"),
		d.connect(t, "producer-bob"), d.connect(t, "worker"), d.connect(t, "reader")
	must := func(who *client, what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %s: %v", who.user, what, who.ref.Explain(err))
		}
	}

	// admin: the streams and the bucket. No shared consumer: each lane has
	// its own on the work stream (a work-queue stream takes no consumers
	// whose filters overlap).
	aq, err := admin.setup(ctx, true, true)
	must(admin, "set up the streams and the bucket", err)

	// worker: finds them as wanted; answers the micro service; watches
	// the max-deliveries advisories.
	wq, err := worker.setup(ctx, false, true)
	must(worker, "set up (use what exists)", err)
	svc, err := micro.AddService(worker.nc, micro.Config{Name: queue.ServiceName, Version: "1.0.0"})
	must(worker, "start the micro service", err)
	defer svc.Stop()
	must(worker, "add the solve endpoint", svc.AddEndpoint("solve", micro.HandlerFunc(func(r micro.Request) {
		_ = r.Respond([]byte("solved"))
	}), micro.WithEndpointSubject(opts.SolveSubject())))
	_, err = worker.nc.SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + names.Stream + ".*")
	must(worker, "watch the max-deliveries advisories", err)
	must(worker, "flush", worker.nc.Flush())

	// producer: its job's record and manifest, a work batch in its lane,
	// the results of a batch it answered itself; its records listed and
	// read back, its results read.
	pq, err := producer.setup(ctx, false, true)
	must(producer, "set up (use what exists)", err)
	_, err = pq.Jobs.Create(ctx, jobID, []byte("record"))
	must(producer, "create the job record", err)
	_, err = pq.Jobs.Update(ctx, jobID, []byte("record, finished"), 1)
	must(producer, "update the job record", err)
	_, err = pq.Jobs.Put(ctx, job.ManifestKey(jobID, 0), []byte("manifest"))
	must(producer, "put a manifest", err)
	// A batch as the producer encodes it: a dead letter of it can be
	// replayed ('dlq replay' keeps one that does not decode).
	g, err := solver.Parse(strings.Repeat(".", 80) + "1")
	if err != nil {
		t.Fatal(err)
	}
	work := opts.WorkMsg(&job.Batch{Job: jobID, Items: []job.Item{{Line: 1, Kind: job.Solve, Grid: g}}}, lane)
	_, err = producer.js.PublishMsg(ctx, work)
	must(producer, "publish a work batch", err)
	_, err = pq.Jobs.Get(ctx, jobID)
	must(producer, "read its job record", err)
	recs, err := job.NewStore(producer.js, pq.Jobs).List(ctx, "producer-berlin", 10, nil)
	must(producer, "list its jobs", err)
	_ = recs
	_, err = bob.setup(ctx, false, true)
	must(bob, "set up (use what exists)", err)
	cached := nats.NewMsg(opts.ResultSubject(jobID, 0))
	cached.Data = []byte("results 0")
	_, err = producer.js.PublishMsg(ctx, cached, queue.ExpectResults())
	must(producer, "publish the results of a batch answered from the cache", err)
	_, err = producer.nc.Request(opts.SolveSubject(), []byte("puzzle"), 5*time.Second)
	must(producer, "ask the solve endpoint", err)
	_, err = pq.Results.GetLastMsgForSubject(ctx, opts.ResultSubject(jobID, 0))
	must(producer, "read its results", err)
	poc, err := pq.Results.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{opts.ResultsFilter(jobID)}})
	must(producer, "read its job's results in order", err)
	pb, err := poc.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	must(producer, "fetch its results", err)
	for range pb.Messages() {
	}
	must(producer, "fetch its results", pb.Error())

	// worker: its lanes' consumers; pull the batch from the lane, publish
	// its results and a dead letter, ack; an event; the cache; the lane's
	// consumer deleted when it has no job left.
	_, err = worker.js.CreateConsumer(ctx, names.Stream, opts.LaneConsumerConfig(otherLane))
	must(worker, "create a lane's consumer", err)
	wc, err := wq.LaneWork(ctx, lane)
	must(worker, "create and look up the lane's consumer", err)
	batch, err := wc.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	must(worker, "pull work", err)
	var got jetstream.Msg
	for m := range batch.Messages() {
		got = m
	}
	if got == nil {
		t.Fatalf("worker: pull work: no message (%v)", worker.ref.Explain(batch.Error()))
	}
	res := nats.NewMsg(opts.ResultSubject(jobID, 1))
	res.Data = []byte("results 1")
	_, err = worker.js.PublishMsg(ctx, res, queue.ExpectResults())
	must(worker, "publish results", err)
	_, err = worker.js.PublishMsg(ctx, opts.DeadLetterMsg(got.Subject(), got.Headers(), got.Data(), "test", errors.New("test"), 1))
	must(worker, "publish a dead letter", err)
	must(worker, "ack", got.DoubleAck(ctx))
	must(worker, "publish an event", worker.nc.Publish(opts.EventSubject(jobID), []byte("{}")))
	rc := cache.NewRedis(worker.rdb, cache.RedisOptions{})
	must(worker, "write the cache", worker.rdb.Set(ctx, rc.Key(cacheK), "value", 0).Err())
	must(worker, "write the cache (MSET)", worker.rdb.MSet(ctx, rc.Key(job.Key{4}), "value").Err())
	_, err = wq.Results.GetLastMsgForSubject(ctx, opts.ResultSubject(jobID, 1))
	must(worker, "read results", err)
	must(worker, "delete the lane's consumer", worker.js.DeleteConsumer(ctx, names.Stream, opts.LaneConsumer(lane)))

	// reader: records, results, dead letters, the cache, the service.
	rq, err := reader.setup(ctx, false, true)
	must(reader, "set up (use what exists)", err)
	_, err = rq.Jobs.Get(ctx, jobID)
	must(reader, "read a job record", err)
	keys, err := rq.Jobs.ListKeys(ctx)
	must(reader, "list the jobs", err)
	for range keys.Keys() {
	}
	_, err = rq.Results.GetLastMsgForSubject(ctx, opts.ResultSubject(jobID, 1))
	must(reader, "read results", err)
	oc, err := rq.Results.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{opts.ResultsFilter(jobID)}})
	must(reader, "read a job's results in order", err)
	rb, err := oc.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	must(reader, "fetch results", err)
	n := 0
	for range rb.Messages() {
		n++
	}
	if n != 2 {
		t.Errorf("reader: %d results read in order, want 2 (%v)", n, reader.ref.Explain(rb.Error()))
	}
	var letters []uint64
	must(reader, "list the dead letters", rq.EachDeadLetter(ctx, func(dl *queue.DeadLetter) error {
		letters = append(letters, dl.Seq)
		return nil
	}))
	if len(letters) != 1 {
		t.Fatalf("reader: %d dead letters, want 1", len(letters))
	}
	_, err = reader.js.Consumer(ctx, names.Stream, otherJob)
	must(reader, "a job's consumer's info (dashboards)", err)
	if v, err := reader.rdb.Get(ctx, rc.Key(cacheK)).Result(); err != nil || v != "value" {
		t.Fatalf("reader: read the cache: %q, %v", v, err)
	}
	_, err = reader.nc.Request(opts.SolveSubject(), []byte("puzzle"), 5*time.Second)
	must(reader, "ask the solve endpoint", err)
	_, err = reader.nc.Request("$SRV.PING."+queue.ServiceName, nil, 5*time.Second)
	must(reader, "ping the micro service", err)

	// admin: dlq replay, job rm (as producer.Remove does it), the cache.
	_, err = aq.Replay(ctx, letters[0])
	must(admin, "replay a dead letter", err)
	ws, err := admin.js.Stream(ctx, names.Stream)
	must(admin, "look up the work stream", err)
	must(admin, "job rm: its work", ws.Purge(ctx, jetstream.WithPurgeSubject(opts.WorkSubject(jobID, lane))))
	must(admin, "job rm: its results", aq.Results.Purge(ctx, jetstream.WithPurgeSubject(opts.ResultsFilter(jobID))))
	must(admin, "job rm: its record", aq.Jobs.Purge(ctx, jobID))
	must(admin, "flush the cache", admin.rdb.FlushAll(ctx).Err())
	for _, c := range []*client{admin, producer, bob, worker, reader} {
		if n := c.ref.Count(); n != 0 {
			t.Errorf("%s: %d refusals, the last: %v", c.user, n, c.ref.Explain(errors.New("allowed operations")))
		}
	}
}

// refusal is one operation a role must not do.
type refusal struct {
	user string
	what string
	// subject is the subject the NATS server must refuse (publish or
	// subscribe, as in the refusal's text); "" for a Redis command, which
	// must fail with a *roles.PermissionError.
	subject string
	op      func(ctx context.Context, c *client) error
}

// The forbidden operations: the findings 1, 5, 6, 8, 9, 10 and
// 11, by each role that must not do them.
var refusals = func() []refusal {
	var r []refusal
	purge := func(stream string) func(ctx context.Context, c *client) error {
		return func(ctx context.Context, c *client) error {
			s, err := c.js.Stream(ctx, stream)
			if err != nil {
				return err
			}
			return s.Purge(ctx)
		}
	}
	pub := func(subject string) func(ctx context.Context, c *client) error {
		return func(ctx context.Context, c *client) error {
			if err := c.nc.Publish(subject, []byte("forged")); err != nil {
				return err
			}
			return c.nc.Flush()
		}
	}
	sub := func(subject string) func(ctx context.Context, c *client) error {
		return func(ctx context.Context, c *client) error {
			if _, err := c.nc.SubscribeSync(subject); err != nil {
				return err
			}
			return c.nc.Flush()
		}
	}
	advisory := "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + names.Stream + ".sudoku-workers-bulk"
	for _, user := range []string{"producer", "worker", "reader"} {
		r = append(r,
			refusal{user, "nats stream purge " + names.Stream, "$JS.API.STREAM.PURGE." + names.Stream, purge(names.Stream)},
			refusal{user, "nats stream purge " + names.Results, "$JS.API.STREAM.PURGE." + names.Results, purge(names.Results)},
			refusal{user, "nats stream rm " + names.Results, "$JS.API.STREAM.DELETE." + names.Results,
				func(ctx context.Context, c *client) error { return c.js.DeleteStream(ctx, names.Results) }},
			refusal{user, "nats kv rm " + names.Bucket, "$JS.API.STREAM.DELETE.KV_" + names.Bucket,
				func(ctx context.Context, c *client) error { return c.js.DeleteKeyValue(ctx, names.Bucket) }},
			refusal{user, "shrink the work stream (max age 1s, finding 1)", "$JS.API.STREAM.UPDATE." + names.Stream,
				func(ctx context.Context, c *client) error {
					_, err := c.js.UpdateStream(ctx, jetstream.StreamConfig{Name: names.Stream,
						Subjects: []string{names.Prefix + ".jobs.>"}, Retention: jetstream.WorkQueuePolicy, MaxAge: time.Second, Storage: jetstream.MemoryStorage})
					return err
				}},
			refusal{user, "create a stream", "$JS.API.STREAM.CREATE.ROGUE",
				func(ctx context.Context, c *client) error {
					_, err := c.js.CreateStream(ctx, jetstream.StreamConfig{Name: "ROGUE", Subjects: []string{"rogue.>"}})
					return err
				}},
			refusal{user, "forge a max-deliveries advisory (finding 10)", advisory, pub(advisory)},
			refusal{user, "FLUSHALL", "", func(ctx context.Context, c *client) error { return c.rdb.FlushAll(ctx).Err() }},
			refusal{user, "CONFIG SET", "", func(ctx context.Context, c *client) error {
				return c.rdb.ConfigSet(ctx, "maxmemory", "1").Err()
			}},
			refusal{user, "DEL a cached solution", "", func(ctx context.Context, c *client) error {
				return c.rdb.Del(ctx, cache.NewRedis(c.rdb, cache.RedisOptions{}).Key(cacheK)).Err()
			}},
		)
	}
	for _, user := range []string{"producer", "reader"} {
		r = append(r,
			refusal{user, "answer " + names.Prefix + ".solve (finding 9)", names.Prefix + ".solve", sub(names.Prefix + ".solve")},
			refusal{user, "answer the micro service's $SRV requests", "$SRV.>", sub("$SRV.>")},
			refusal{user, "pull work", "$JS.API.CONSUMER.MSG.NEXT." + names.Stream + "." + otherJob,
				pub("$JS.API.CONSUMER.MSG.NEXT." + names.Stream + "." + otherJob)},
			refusal{user, "ack work", "$JS.ACK." + names.Stream + "." + otherJob + ".1.1.1.0.0",
				pub("$JS.ACK." + names.Stream + "." + otherJob + ".1.1.1.0.0")},
			refusal{user, "publish a dead letter", names.Prefix + ".dlq.forged", pub(names.Prefix + ".dlq.forged")},
			refusal{user, "SET a cached solution (finding 8)", "", func(ctx context.Context, c *client) error {
				return c.rdb.Set(ctx, cache.NewRedis(c.rdb, cache.RedisOptions{}).Key(cacheK), "forged", 0).Err()
			}},
		)
	}
	// One producer on another's job (issue 28): producer-berlin on
	// producer-bob's. Every subject and key of a job names its owner, and
	// a producer's permissions name its own.
	bobRecord := "$KV." + names.Bucket + "." + otherID
	bobWork := opts.WorkSubject(otherID, otherLane)
	bobResults := opts.ResultSubject(otherID, 0)
	for _, user := range []string{"producer-berlin", "reader"} {
		r = append(r,
			refusal{user, "cancel another's job (kv put its record)", bobRecord, func(ctx context.Context, c *client) error {
				kv, err := c.js.KeyValue(ctx, names.Bucket)
				if err != nil {
					return err
				}
				_, err = kv.Put(ctx, otherID, []byte(`{"state":"cancelled"}`))
				return err
			}},
			refusal{user, "delete another's record (kv del)", bobRecord, func(ctx context.Context, c *client) error {
				kv, err := c.js.KeyValue(ctx, names.Bucket)
				if err != nil {
					return err
				}
				return kv.Delete(ctx, otherID)
			}},
			refusal{user, "put junk under another's job (a manifest)", bobRecord + ".m.0", pub(bobRecord + ".m.0")},
			refusal{user, "publish work into another's lane", bobWork, pub(bobWork)},
			refusal{user, "publish results of another's job (finding 6)", bobResults, pub(bobResults)},
			refusal{user, "submit as another", names.Prefix + ".submit.producer-bob", pub(names.Prefix + ".submit.producer-bob")},
			refusal{user, "cancel another's job (micro)", names.Prefix + ".cancel.producer-bob", pub(names.Prefix + ".cancel.producer-bob")},
			refusal{user, "remove another's lane's consumer", "$JS.API.CONSUMER.DELETE." + names.Stream + "." + otherJob,
				func(ctx context.Context, c *client) error { return c.js.DeleteConsumer(ctx, names.Stream, otherJob) }},
			refusal{user, "read another's lane (a consumer of its own)", "$JS.API.CONSUMER.CREATE." + names.Stream + ".rogue." + bobWork,
				func(ctx context.Context, c *client) error {
					_, err := c.js.CreateConsumer(ctx, names.Stream, jetstream.ConsumerConfig{Durable: "rogue", FilterSubject: bobWork})
					return err
				}},
		)
	}
	r = append(r,
		refusal{"producer-berlin", "read another's record", "$JS.API.DIRECT.GET.KV_" + names.Bucket + "." + bobRecord,
			func(ctx context.Context, c *client) error {
				kv, err := c.js.KeyValue(ctx, names.Bucket)
				if err != nil {
					return err
				}
				_, err = kv.Get(ctx, otherID)
				return err
			}},
		refusal{"producer-berlin", "read another's results", "$JS.API.DIRECT.GET." + names.Results + "." + bobResults,
			func(ctx context.Context, c *client) error {
				s, err := c.js.Stream(ctx, names.Results)
				if err != nil {
					return err
				}
				_, err = s.GetLastMsgForSubject(ctx, bobResults)
				return err
			}},
		refusal{"producer-berlin", "read any result by its sequence", "$JS.API.DIRECT.GET." + names.Results,
			func(ctx context.Context, c *client) error {
				s, err := c.js.Stream(ctx, names.Results)
				if err != nil {
					return err
				}
				_, err = s.GetMsg(ctx, 1)
				return err
			}},
		refusal{"producer-berlin", "follow another's results in order",
			"$JS.API.CONSUMER.CREATE." + names.Results + ".*." + opts.ResultsFilter(otherID),
			func(ctx context.Context, c *client) error {
				s, err := c.js.Stream(ctx, names.Results)
				if err != nil {
					return err
				}
				_, err = s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{opts.ResultsFilter(otherID)}})
				return err
			}},
		refusal{"worker", "replace stored results (delete one)", "$JS.API.STREAM.MSG.DELETE." + names.Results,
			func(ctx context.Context, c *client) error {
				s, err := c.js.Stream(ctx, names.Results)
				if err != nil {
					return err
				}
				return s.DeleteMsg(ctx, 1)
			}},
		refusal{"reader", "submit a job", names.Prefix + ".submit.reader", pub(names.Prefix + ".submit.reader")},
		refusal{"reader", "create a consumer on the work stream", "$JS.API.CONSUMER.CREATE." + names.Stream + ".rogue",
			func(ctx context.Context, c *client) error {
				_, err := c.js.CreateConsumer(ctx, names.Stream, jetstream.ConsumerConfig{Durable: "rogue"})
				return err
			}},
		refusal{"worker", "remove a job's record (kv purge)", "$JS.API.STREAM.PURGE.KV_" + names.Bucket, purge("KV_" + names.Bucket)},
		refusal{"worker", "SET a key outside the cache", "", func(ctx context.Context, c *client) error {
			return c.rdb.Set(ctx, "sudoku:jobs", "x", 0).Err()
		}},
		refusal{"worker", "KEYS", "", func(ctx context.Context, c *client) error { return c.rdb.Keys(ctx, "*").Err() }},
		refusal{"admin", "forge a max-deliveries advisory (finding 10)", advisory, pub(advisory)},
		refusal{"admin", "answer " + names.Prefix + ".solve (finding 9)", names.Prefix + ".solve", sub(names.Prefix + ".solve")},
	)
	return r
}()

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// forbidden runs the refusals, each on a connection of its own (so that
// a refusal is that operation's), all at once (a refused request ends
// only when it times out), then checks that nothing changed.
func forbidden(t *testing.T, d *deployment) {
	ctx := ctx10(t)
	admin := d.connect(t, "admin")
	aq, err := admin.setup(ctx, false, true)
	if err != nil {
		t.Fatal(err)
	}
	// What the refused operations would change.
	work := nats.NewMsg(opts.WorkSubject(otherID, otherLane))
	work.Data = []byte("batch")
	if _, err := admin.js.PublishMsg(ctx, work); err != nil {
		t.Fatal(err)
	}
	res := nats.NewMsg(opts.ResultSubject(otherID, 0))
	res.Data = []byte("results")
	if _, err := admin.js.PublishMsg(ctx, res); err != nil {
		t.Fatal(err)
	}
	if _, err := aq.Jobs.Put(ctx, otherID, []byte("record")); err != nil {
		t.Fatal(err)
	}
	key := cache.NewRedis(admin.rdb, cache.RedisOptions{}).Key(cacheK)
	if err := admin.rdb.Set(ctx, key, "value", 0).Err(); err != nil {
		t.Fatal(err)
	}
	before := streamCounts(ctx, t, admin.js)

	// Every operation at once, each on a connection of its own (t.Parallel
	// would run only GOMAXPROCS of them at a time).
	type outcome struct {
		c   *client
		err error
	}
	outcomes := make([]outcome, len(refusals))
	// Connected first, one at a time: the server checks a bcrypt hash at
	// each connection, and one made while the operations run (the race
	// detector's speed, a busy machine) can miss the client's handshake.
	clients := make([]*client, len(refusals))
	for i, r := range refusals {
		clients[i] = d.connect(t, r.user)
	}
	var wg sync.WaitGroup
	for i, r := range refusals {
		c := clients[i]
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := r.op(ctx, c)
			if r.subject != "" {
				// NATS refuses asynchronously: the refusal arrives before a
				// flush's PONG, and the handler gets it on a goroutine of
				// its own.
				for deadline := time.Now().Add(5 * time.Second); c.ref.Count() == 0 && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
				err = c.ref.Explain(cmpErr(err, errors.New("no error")))
			}
			outcomes[i] = outcome{c, err}
		})
	}
	wg.Wait()
	for i, r := range refusals {
		t.Run("refused/"+r.user+"/"+strings.ReplaceAll(r.what, " ", "_"), func(t *testing.T) {
			err := outcomes[i].err
			var pe *roles.PermissionError
			if !errors.As(err, &pe) {
				t.Fatalf("not refused: %v", err)
			}
			if want := fmt.Sprintf("user %q (role %s)", r.user, strings.SplitN(r.user, "-", 2)[0]); !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not name %s", err, want)
			}
			if r.subject == "" {
				if pe.Server != "Redis" {
					t.Errorf("refused by %s, want Redis: %v", pe.Server, err)
				}
				return
			}
			// A "*" in r.subject stands for a token made at random (an
			// ordered consumer's name).
			quoted := regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf("%q", r.subject)))
			if strings.Contains(r.subject, "*") {
				quoted = regexp.MustCompile(strings.ReplaceAll(regexp.QuoteMeta(fmt.Sprintf("%q", r.subject)), `\*`, `[^.]+`))
			}
			if !quoted.MatchString(pe.What) || pe.Server != "NATS" {
				t.Errorf("%s refused %s, want %q refused by NATS", pe.Server, pe.What, r.subject)
			}
		})
	}

	// Nothing refused changed anything.
	ctx = ctx10(t)
	if after := streamCounts(ctx, t, admin.js); after != before {
		t.Errorf("streams (messages) before the refused operations %v, after %v", before, after)
	}
	if v, err := admin.rdb.Get(ctx, key).Result(); err != nil || v != "value" {
		t.Errorf("the cached value after the refused operations: %q, %v", v, err)
	}
	if _, err := admin.js.Stream(ctx, "ROGUE"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream ROGUE: %v, want not found", err)
	}
}

// streamCounts returns the messages of the four streams.
func streamCounts(ctx context.Context, t *testing.T, js jetstream.JetStream) [4]uint64 {
	t.Helper()
	var n [4]uint64
	for i, s := range []string{names.Stream, names.Results, names.DLQ, "KV_" + names.Bucket} {
		st, err := js.Stream(ctx, s)
		if err != nil {
			t.Fatalf("stream %s: %v", s, err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n[i] = info.State.Msgs
	}
	return n
}
