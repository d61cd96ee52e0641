package config_test

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/sudoku-queue/sudoku-queue/internal/config"
)

// A command defines the global flags and those of the keys it uses,
// parses its command line and loads the configuration: flags beat the
// environment, which beats the file.
func ExampleLoad() {
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	config.AddGlobalFlags(fs)
	config.AddKeyFlags(fs, "nats.url", "redis.addrs", "worker.concurrency")
	_ = fs.Parse([]string{"--worker-concurrency", "4"})

	env := map[string]string{
		"SUDOKU_REDIS_ADDRS":    "redis1:6379,redis2:6379",
		"SUDOKU_QUEUE_ACK_WAIT": "1m",
	}
	cfg, err := config.Load(config.LoadOptions{
		Flags: fs,
		Env:   func(name string) (string, bool) { v, ok := env[name]; return v, ok },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Worker.Concurrency, cfg.Redis.Addrs, cfg.Queue.AckWait, cfg.WorkerHeartbeat())
	// Output: 4 [redis1:6379 redis2:6379] 1m0s 20s
}

// Load reports every bad setting at once, naming the key, the value and
// where it came from.
func ExampleLoad_errors() {
	env := map[string]string{
		"SUDOKU_QUEUE_ACK_WAIT":     "30",
		"SUDOKU_WORKER_CONCURRENCY": "-1",
		"SUDOKU_REDIS_ADDRS":        "redis",
	}
	_, err := config.Load(config.LoadOptions{
		Env: func(name string) (string, bool) { v, ok := env[name]; return v, ok },
	})
	fmt.Println(err)
	// Output:
	// config: queue.ack_wait = "30" (from $SUDOKU_QUEUE_ACK_WAIT): a duration needs a unit, such as "30s"
	// config: redis.addrs = "redis" (from $SUDOKU_REDIS_ADDRS): must be host:port
	// config: worker.concurrency = -1 (from $SUDOKU_WORKER_CONCURRENCY): must be >= 0
}

// A Secret prints and logs as "[redacted]"; Reveal gives its value to
// the client library that needs it.
func ExampleSecret() {
	cfg := config.Default()
	cfg.Redis.Password = "hunter2"
	fmt.Println(cfg.Redis.Password, len(cfg.Redis.Password.Reveal()))

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // a stable output for the example
			}
			return a
		},
	}))
	logger.Info("starting", "password", cfg.Redis.Password)
	// Output:
	// [redacted] 7
	// level=INFO msg=starting password=[redacted]
}
