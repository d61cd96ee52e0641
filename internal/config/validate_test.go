package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *Config)
		errs   []wantErr // nil: valid
	}{
		{"defaults are valid", func(c *Config) {}, nil},
		{"cluster of URLs is valid", func(c *Config) {
			c.NATS.URL = "nats://n1:4222, tls://n2:4443,ws://n3:80,wss://n4,n5:4222"
		}, nil},
		{"empty nats url", func(c *Config) { c.NATS.URL = "" },
			[]wantErr{{key: "nats.url", value: `""`}}},
		{"nats url with a bad scheme", func(c *Config) { c.NATS.URL = "http://x:4222" },
			[]wantErr{{key: "nats.url", value: `"http://x:4222"`}}},
		{"nats url with a bad port", func(c *Config) { c.NATS.URL = "nats://x:4222,nats://y:99999" },
			[]wantErr{{key: "nats.url", value: `"nats://y:99999"`}}},
		{"nats url without a host", func(c *Config) { c.NATS.URL = "nats://:4222" },
			[]wantErr{{key: "nats.url"}}},
		{"nats url that is no URL", func(c *Config) { c.NATS.URL = "just-a-host" },
			[]wantErr{{key: "nats.url", value: `"just-a-host"`}}},
		{"nats url with an empty entry", func(c *Config) { c.NATS.URL = "nats://a:1,,nats://b:2" },
			[]wantErr{{key: "nats.url"}}},
		{"nats password without user", func(c *Config) { c.NATS.Password = "pw" },
			[]wantErr{{key: "nats.password"}}},
		{"nats user without password", func(c *Config) { c.NATS.User = "u" },
			[]wantErr{{key: "nats.user", value: `"u"`}}},
		{"nats token and user", func(c *Config) { c.NATS.User, c.NATS.Password, c.NATS.Token = "u", "p", "t" },
			[]wantErr{{key: "nats.token"}}},
		{"nats creds and nkey", func(c *Config) { c.NATS.CredsFile, c.NATS.NKeyFile = "a", "b" },
			[]wantErr{{key: "nats.nkey_file", value: `"b"`}}},
		{"nats client cert without key", func(c *Config) { c.NATS.TLS.CertFile = "c.pem" },
			[]wantErr{{key: "nats.tls.key_file"}}},
		{"redis client key without cert", func(c *Config) { c.Redis.TLS.KeyFile = "k.pem" },
			[]wantErr{{key: "redis.tls.cert_file"}}},
		{"zero connect timeout", func(c *Config) { c.NATS.ConnectTimeout = 0 },
			[]wantErr{{key: "nats.connect_timeout", value: "0s"}}},
		{"no redis addrs", func(c *Config) { c.Redis.Addrs = nil },
			[]wantErr{{key: "redis.addrs"}}},
		{"redis addr not host:port", func(c *Config) { c.Redis.Addrs = []string{"a:1", "redis"} },
			[]wantErr{{key: "redis.addrs", value: `"redis"`}}},
		{"redis addr without host", func(c *Config) { c.Redis.Addrs = []string{":6379"} },
			[]wantErr{{key: "redis.addrs", value: `":6379"`}}},
		{"redis addr with a bad port", func(c *Config) { c.Redis.Addrs = []string{"r:redis"} },
			[]wantErr{{key: "redis.addrs", value: `"r:redis"`}}},
		{"negative redis db", func(c *Config) { c.Redis.DB = -1 },
			[]wantErr{{key: "redis.db", value: "-1"}}},
		{"redis db in a cluster", func(c *Config) { c.Redis.DB, c.Redis.Addrs = 2, []string{"a:1", "b:1"} },
			[]wantErr{{key: "redis.db", value: "2"}}},
		{"redis db with sentinels is valid", func(c *Config) {
			c.Redis.DB, c.Redis.Addrs, c.Redis.MasterName = 2, []string{"a:1", "b:1"}, "mymaster"
		}, nil},
		{"negative pool size", func(c *Config) { c.Redis.PoolSize = -1 },
			[]wantErr{{key: "redis.pool_size", value: "-1"}}},
		{"negative cache ttl", func(c *Config) { c.Cache.TTL = -time.Second },
			[]wantErr{{key: "cache.ttl", value: "-1s"}}},
		{"stream name with a dot", func(c *Config) { c.Queue.Stream = "a.b" },
			[]wantErr{{key: "queue.stream", value: `"a.b"`}}},
		{"empty consumer", func(c *Config) { c.Queue.Consumer = "" },
			[]wantErr{{key: "queue.consumer", value: `""`}}},
		{"dlq stream is the stream", func(c *Config) { c.Queue.DLQStream = c.Queue.Stream },
			[]wantErr{{key: "queue.dlq_stream", value: `"SUDOKU"`}}},
		{"subject prefix with a wildcard", func(c *Config) { c.Queue.SubjectPrefix = "a.*" },
			[]wantErr{{key: "queue.subject_prefix", value: `"a.*"`}}},
		{"subject prefix with a trailing dot", func(c *Config) { c.Queue.SubjectPrefix = "a." },
			[]wantErr{{key: "queue.subject_prefix", value: `"a."`}}},
		{"replicas 0", func(c *Config) { c.Queue.Replicas = 0 },
			[]wantErr{{key: "queue.replicas", value: "0"}}},
		{"replicas 6", func(c *Config) { c.Queue.Replicas = 6 },
			[]wantErr{{key: "queue.replicas", value: "6"}}},
		{"storage disk", func(c *Config) { c.Queue.Storage = "disk" },
			[]wantErr{{key: "queue.storage", value: `"disk"`}}},
		{"negative max age", func(c *Config) { c.Queue.MaxAge = -time.Minute },
			[]wantErr{{key: "queue.max_age", value: "-1m0s"}}},
		{"negative ack wait", func(c *Config) { c.Queue.AckWait = -time.Second },
			[]wantErr{{key: "queue.ack_wait", value: "-1s"}}},
		{"max deliver 0", func(c *Config) { c.Queue.MaxDeliver, c.Queue.Backoff = 0, nil },
			[]wantErr{{key: "queue.max_deliver", value: "0"}}},
		{"as many backoffs as deliveries", func(c *Config) { c.Queue.MaxDeliver = 4 },
			[]wantErr{{key: "queue.backoff", value: "[1s, 5s, 30s, 1m0s]"}}},
		{"zero backoff", func(c *Config) { c.Queue.Backoff = []time.Duration{0} },
			[]wantErr{{key: "queue.backoff", value: "[0s]"}}},
		{"no backoff is valid", func(c *Config) { c.Queue.Backoff = nil }, nil},
		{"max ack pending 0", func(c *Config) { c.Queue.MaxAckPending = 0 },
			[]wantErr{{key: "queue.max_ack_pending", value: "0"}}},
		{"negative batch size", func(c *Config) { c.Queue.BatchSize = -1 },
			[]wantErr{{key: "queue.batch_size", value: "-1"}}},
		{"zero batch size", func(c *Config) { c.Queue.BatchSize = 0 },
			[]wantErr{{key: "queue.batch_size", value: "0"}}},
		{"batch size over 100000", func(c *Config) { c.Queue.BatchSize = 100_001 },
			[]wantErr{{key: "queue.batch_size", value: "100001"}}},
		{"batch size 100000 is valid", func(c *Config) { c.Queue.BatchSize = 100_000 }, nil},
		{"message bytes over 64 MiB", func(c *Config) { c.Queue.MaxMessageBytes = 64<<20 + 1 },
			[]wantErr{{key: "queue.max_message_bytes", value: "67108865"}}},
		{"publish max pending 0", func(c *Config) { c.Queue.PublishMaxPending = 0 },
			[]wantErr{{key: "queue.publish_max_pending", value: "0"}}},
		{"negative concurrency", func(c *Config) { c.Worker.Concurrency = -1 },
			[]wantErr{{key: "worker.concurrency", value: "-1"}}},
		{"negative shutdown timeout", func(c *Config) { c.Worker.ShutdownTimeout = -time.Second },
			[]wantErr{{key: "worker.shutdown_timeout", value: "-1s"}}},
		{"heartbeat not under ack wait", func(c *Config) { c.Worker.Heartbeat = 30 * time.Second },
			[]wantErr{{key: "worker.heartbeat", value: "30s"}}},
		{"negative heartbeat", func(c *Config) { c.Worker.Heartbeat = -time.Second },
			[]wantErr{{key: "worker.heartbeat", value: "-1s"}}},
		{"metrics on a port only is valid", func(c *Config) { c.Metrics.Addr = ":9090" }, nil},
		{"metrics addr without port", func(c *Config) { c.Metrics.Addr = "localhost" },
			[]wantErr{{key: "metrics.addr", value: `"localhost"`}}},
		{"log level loud", func(c *Config) { c.Log.Level = "loud" },
			[]wantErr{{key: "log.level", value: `"loud"`}}},
		{"log level upper case is valid", func(c *Config) { c.Log.Level = "DEBUG" }, nil},
		{"log format xml", func(c *Config) { c.Log.Format = "xml" },
			[]wantErr{{key: "log.format", value: `"xml"`}}},
		{"serve addr empty", func(c *Config) { c.Serve.Addr = "" },
			[]wantErr{{key: "serve.addr", value: `""`}}},
		{"serve body 0", func(c *Config) { c.Serve.MaxBodyBytes = 0 },
			[]wantErr{{key: "serve.max_body_bytes", value: "0"}}},
		{"serve timeout 0", func(c *Config) { c.Serve.RequestTimeout = 0 },
			[]wantErr{{key: "serve.request_timeout", value: "0s"}}},
		{"negative job wait", func(c *Config) { c.Job.WaitTimeout = -1 },
			[]wantErr{{key: "job.wait_timeout", value: "-1ns"}}},
		{"negative job ttl", func(c *Config) { c.Job.ResultTTL = -time.Hour },
			[]wantErr{{key: "job.result_ttl", value: "-1h0m0s"}}},
		{"several problems at once", func(c *Config) {
			c.Worker.Concurrency = -1
			c.Queue.Storage = "disk"
			c.Log.Format = "xml"
		}, []wantErr{{key: "queue.storage"}, {key: "worker.concurrency"}, {key: "log.format"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.change(c)
			err := c.Validate()
			if tt.errs == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			checkErrs(t, err, tt.errs)
		})
	}
}

func TestErrorFormat(t *testing.T) {
	c := Default()
	c.Worker.Concurrency = -1
	err := c.Validate()
	const want = "config: worker.concurrency = -1: must be >= 0"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Key != "worker.concurrency" || e.Value != "-1" {
		t.Errorf("errors.As: %#v", e)
	}
}

func TestValidateHidesURLCredentials(t *testing.T) {
	c := Default()
	c.NATS.URL = "nats://alice:hunter2@n1:4222,nats://s3cr%zzet@n2:bad"
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, secret := range []string{"hunter2", "s3cr", "alice"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error shows %q: %v", secret, err)
		}
	}
	if !strings.Contains(err.Error(), "nats://[redacted]@n2:bad") {
		t.Errorf("error does not show the redacted URL: %v", err)
	}
}

func TestRedactURLs(t *testing.T) {
	tests := []struct{ in, want string }{
		{"nats://a:4222", "nats://a:4222"},
		{"nats://u:p@a:4222", "nats://[redacted]@a:4222"},
		{"tok@a:4222", "[redacted]@a:4222"},
		{"nats://u:p@a:4222,nats://b:4222,wss://t@c/path@x", "nats://[redacted]@a:4222,nats://b:4222,wss://[redacted]@c/path@x"},
		{"nats://u:p@w@a:4222", "nats://[redacted]@a:4222"},
	}
	for _, tt := range tests {
		if got := redactURLs(tt.in); got != tt.want {
			t.Errorf("redactURLs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
