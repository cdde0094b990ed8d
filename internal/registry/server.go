package registry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem" // the "filesystem" storage driver
	"github.com/sirupsen/logrus"
)

// Server is the embedded registry: the CNCF distribution registry's HTTP
// application over its filesystem driver, rooted at the state directory it
// was opened on. Everything the registry acknowledged is in that directory
// in distribution's own layout, so a restart serves what was pushed before
// it with no replay step that could fail. One Server per directory.
//
// Deletes are off unless Access allows them, and nothing ever
// garbage-collects the blobs: an image a host runs stays pullable for as
// long as the state directory lives. Who may push and pull is Access's.
type Server struct {
	app     *handlers.App
	handler http.Handler

	srvMu sync.Mutex
	srv   *http.Server
	l     net.Listener // what srv serves on, closed by Close itself
	addr  string
}

// ServerOption configures New.
type ServerOption func(*serverConfig)

type serverConfig struct {
	log    io.Writer
	access Access
}

// WithLog sends the registry's own log lines (warnings and errors of the
// storage and the HTTP application, as logfmt) to w. They are discarded by
// default. The distribution registry logs through logrus's standard logger,
// so the last Server opened in a process decides where they go.
func WithLog(w io.Writer) ServerOption {
	return func(c *serverConfig) { c.log = w }
}

// secretFile keeps the key the registry signs upload state with, so that an
// upload started before a restart can finish after it.
const secretFile = "http-secret"

// New opens (creating if needed) the registry stored in dir.
func New(dir string, opts ...ServerOption) (*Server, error) {
	cfg := serverConfig{log: io.Discard}
	for _, o := range opts {
		o(&cfg)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("registry store %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("registry store: %w", err)
	}
	if err := refuseLegacy(abs); err != nil {
		return nil, err
	}
	secret, err := httpSecret(abs)
	if err != nil {
		return nil, err
	}
	logrus.SetOutput(skipEmpty{cfg.log})
	logrus.SetLevel(logrus.WarnLevel)
	logrus.SetFormatter(quietClientErrors{&logrus.TextFormatter{DisableColors: true}})

	c := &configuration.Configuration{
		Storage: configuration.Storage{
			"filesystem": configuration.Parameters{"rootdirectory": abs},
			"delete":     configuration.Parameters{"enabled": true},
		},
	}
	c.HTTP.Secret = secret
	// What the distribution registry's YAML parser fills in when a file
	// leaves it out; built in code, the zero value would refuse every
	// /v2/_catalog page.
	c.Catalog.MaxEntries = 1000
	c.Tags.MaxTags = 1000
	app, err := newApp(c)
	if err != nil {
		return nil, fmt.Errorf("registry store %s: %w", abs, err)
	}
	return &Server{app: app, handler: cfg.access.guard(app)}, nil
}

// newApp builds the distribution application, which reports a bad
// configuration or storage by panicking.
func newApp(c *configuration.Configuration) (app *handlers.App, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("distribution registry: %v", r)
		}
	}()
	return handlers.NewApp(context.Background(), c), nil
}

// httpSecret reads the upload-signing key kept in dir, creating it on the
// first start.
func httpSecret(dir string) (string, error) {
	p := filepath.Join(dir, secretFile)
	b, err := os.ReadFile(p)
	if err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("registry store: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("registry secret: %w", err)
	}
	secret := hex.EncodeToString(raw)
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("registry store: %w", err)
	}
	return secret, nil
}

// refuseLegacy stops at a store written by meshroll's earlier, hand-written
// registry (blobs/ and manifests/ beside each other), whose images the
// distribution registry cannot see, rather than serving an empty registry
// over it.
func refuseLegacy(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "manifests")); err != nil {
		return nil
	}
	return fmt.Errorf("registry store %s holds images in the layout of an earlier meshroll (blobs/ and manifests/), which this registry does not read: "+
		"move that directory aside (or start from a fresh state directory; see docs/registry.md)", dir)
}

// Handler serves the OCI distribution API at the site root.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on addr (for example "127.0.0.1:0") and serves in the
// background until Close. It returns the registry's URL, http://host:port,
// which is what Options.Address takes.
func (s *Server) Start(addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("registry listen: %w", err)
	}
	srv, err := s.register(l)
	if err != nil {
		return "", err
	}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), nil
}

// ListenAndServe listens on addr and serves until Close, which makes it
// return nil.
func (s *Server) ListenAndServe(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("registry listen: %w", err)
	}
	return s.Serve(l)
}

// Serve serves on l until Close, which makes it return nil.
func (s *Server) Serve(l net.Listener) error {
	srv, err := s.register(l)
	if err != nil {
		return err
	}
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("registry serve: %w", err)
	}
	return nil
}

// register records the http.Server before it serves, so that a Close right
// after Start cannot miss it. A Server serves once.
func (s *Server) register(l net.Listener) (*http.Server, error) {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.srv != nil {
		_ = l.Close()
		return nil, errors.New("registry: already serving (or closed)")
	}
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 30 * time.Second}
	s.l, s.addr = l, l.Addr().String()
	return s.srv, nil
}

// Addr is the address being served, empty before Start or Serve.
func (s *Server) Addr() string {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	return s.addr
}

// Close stops serving and the registry's background upload purger.
// Everything acknowledged is already on disk, and the address is free
// again when Close returns, so that a registry restarted on it at once
// finds it free.
func (s *Server) Close() error {
	s.srvMu.Lock()
	srv, l := s.srv, s.l
	if srv == nil {
		// Never served: mark closed so that a later Start is refused.
		s.srv = &http.Server{}
	}
	s.srvMu.Unlock()
	var err error
	if srv != nil {
		err = srv.Close()
	}
	if l != nil {
		// srv.Close closes only the listeners Serve has begun on: a Close
		// right after Start may come first, and Serve would close it
		// later, in its own goroutine.
		if lerr := l.Close(); !errors.Is(lerr, net.ErrClosed) {
			err = errors.Join(err, lerr)
		}
	}
	return errors.Join(err, s.app.Shutdown())
}

// quietClientErrors drops the registry's "response completed with error"
// lines for answers below 500. The registry logs every 404 at error level,
// and a builder asks for blobs and manifests it has yet to push on every
// build, so the worker's log filled with errors that are the registry
// working; a 5xx still shows.
type quietClientErrors struct{ logrus.Formatter }

func (f quietClientErrors) Format(e *logrus.Entry) ([]byte, error) {
	if status, ok := e.Data["http.response.status"].(int); ok && status < 500 {
		return nil, nil
	}
	return f.Formatter.Format(e)
}

// skipEmpty writes through to W everything but the empty lines a dropped
// entry leaves.
type skipEmpty struct{ W io.Writer }

func (s skipEmpty) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return s.W.Write(p)
}
