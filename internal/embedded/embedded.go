// Package embedded runs a NATS server with JetStream inside the process,
// for the one-command start (`sudoku solve`) and for hermetic tests. It is
// the real nats-server (the nats-server/v2 module), not a stand-in.
package embedded

import (
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Options tune Start.
type Options struct {
	// DataDir is where JetStream stores its files; "" means a new
	// temporary folder, removed by Shutdown.
	DataDir string
	// Listen makes the server listen on 127.0.0.1:Port (0: a free port) so
	// other processes can connect; without it, only this process can, and
	// no port is opened at all.
	Listen bool
	Port   int
}

// Server is a running embedded server.
type Server struct {
	ns      *server.Server
	tempDir string
}

// Start starts a server and waits until it accepts connections.
func Start(opts Options) (*Server, error) {
	s := &Server{}
	dir := opts.DataDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "sudoku-nats-*"); err != nil {
			return nil, fmt.Errorf("embedded: %w", err)
		}
		s.tempDir = dir
	}
	so := &server.Options{
		ServerName: "sudoku-embedded",
		Host:       "127.0.0.1",
		Port:       opts.Port,
		DontListen: !opts.Listen,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
	}
	if opts.Listen && opts.Port == 0 {
		so.Port = server.RANDOM_PORT
	}
	ns, err := server.NewServer(so)
	if err != nil {
		s.cleanup()
		return nil, fmt.Errorf("embedded: nats server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		s.cleanup()
		return nil, fmt.Errorf("embedded: nats server not ready after 10s")
	}
	s.ns = ns
	return s, nil
}

// ClientURL returns the URL other processes connect to ("" when the server
// does not listen).
func (s *Server) ClientURL() string {
	if s.ns.Addr() == nil {
		return ""
	}
	return s.ns.ClientURL()
}

// Connect returns a client connection to the server (in-process, without
// TCP, when the server does not listen).
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	opts = append(opts, nats.InProcessServer(s.ns))
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded: connect: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and removes its temporary folder.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.cleanup()
}

func (s *Server) cleanup() {
	if s.tempDir != "" {
		_ = os.RemoveAll(s.tempDir)
	}
}
