package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	ggcr "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// maxManifest bounds a manifest body; the distribution spec asks registries
// to accept at least 4 MiB.
const maxManifest = 4 << 20

// Server is the embedded registry. Blobs live under dir/blobs (in the same
// layout as go-containerregistry's disk blob handler) and every accepted
// manifest under dir/manifests, so that an image pushed before a restart can
// still be pulled by tag and by digest after it. One Server per directory:
// two processes sharing a directory would each replay only what they saw.
type Server struct {
	dir   string
	inner http.Handler
	// mu serialises manifest writes with their persistence, so that the
	// order of records on disk is the order the registry applied them and a
	// tag pushed twice concurrently replays to the manifest it last held.
	mu sync.Mutex

	srvMu sync.Mutex
	srv   *http.Server
	addr  string
}

// ServerOption configures New.
type ServerOption func(*serverConfig)

type serverConfig struct{ log io.Writer }

// WithRequestLog sends the registry's per-request log lines to w. They are
// discarded by default: a pull logs several lines, and the worker's log is
// for plans.
func WithRequestLog(w io.Writer) ServerOption {
	return func(c *serverConfig) { c.log = w }
}

// manifestRecord is one persisted manifest: the key it is served under in a
// repository, and the exact bytes and content type that were pushed.
type manifestRecord struct {
	Repo        string `json:"repo"`
	Reference   string `json:"reference"`
	ContentType string `json:"content_type"`
	Digest      string `json:"digest"`
	Manifest    []byte `json:"manifest"`
}

// New opens (creating if needed) the registry stored in dir and replays its
// manifests, so that the returned Server serves everything that was pushed to
// it before.
func New(dir string, opts ...ServerOption) (*Server, error) {
	cfg := serverConfig{log: io.Discard}
	for _, o := range opts {
		o(&cfg)
	}
	for _, d := range []string{filepath.Join(dir, "blobs"), filepath.Join(dir, "manifests")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("registry store: %w", err)
		}
	}
	// Uploads cut short by a crash leave temporary files; nothing names them.
	if tmps, err := filepath.Glob(filepath.Join(dir, "blobs", "*", ".tmp-*")); err == nil {
		for _, p := range tmps {
			_ = os.Remove(p)
		}
	}
	s := &Server{dir: dir}
	s.inner = ggcr.New(
		ggcr.WithBlobHandler(&diskBlobs{dir: filepath.Join(dir, "blobs")}),
		ggcr.Logger(log.New(cfg.log, "registry: ", log.LstdFlags)),
	)
	if err := s.replay(); err != nil {
		return nil, err
	}
	return s, nil
}

// Handler serves the OCI distribution API at the site root.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

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
	s.addr = l.Addr().String()
	return s.srv, nil
}

// Addr is the address being served, empty before Start or Serve.
func (s *Server) Addr() string {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	return s.addr
}

// Close stops serving. Everything acknowledged is already on disk.
func (s *Server) Close() error {
	s.srvMu.Lock()
	srv := s.srv
	s.srvMu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}

// manifestPath splits a /v2/<repo>/manifests/<reference> path the way the
// upstream handler does; ok is false for every other path.
func manifestPath(p string) (repo, ref string, ok bool) {
	// Like upstream, the /v2 prefix is not checked: the record must name the
	// repository the upstream handler stored the manifest under. (Its blob
	// check, which runs first, cannot match when the next-to-last element
	// is "manifests".)
	elem := strings.Split(p, "/")[1:]
	if len(elem) < 4 || elem[len(elem)-2] != "manifests" {
		return "", "", false
	}
	return strings.Join(elem[1:len(elem)-2], "/"), elem[len(elem)-1], true
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	repo, ref, ok := manifestPath(r.URL.Path)
	if !ok || (r.Method != http.MethodPut && r.Method != http.MethodDelete) {
		s.inner.ServeHTTP(w, r)
		return
	}
	var body []byte
	if r.Method == http.MethodPut {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxManifest))
		if err != nil {
			http.Error(w, "manifest too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	rec := httptest.NewRecorder()
	s.inner.ServeHTTP(rec, r)
	var err error
	switch {
	case r.Method == http.MethodPut && rec.Code == http.StatusCreated:
		err = s.persistPut(repo, ref, r.Header.Get("Content-Type"), body)
	case r.Method == http.MethodDelete && rec.Code == http.StatusAccepted:
		err = s.remove(repo, ref)
	}
	if err != nil {
		// The manifest is in memory but not on disk; refuse it so the client
		// retries rather than trusting an image a restart would lose.
		http.Error(w, "registry store: "+err.Error(), http.StatusInternalServerError)
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// persistPut records a manifest under the two keys the upstream handler
// stores it under: the reference it was pushed to and its digest.
func (s *Server) persistPut(repo, ref, contentType string, body []byte) error {
	sum := sha256.Sum256(body)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	keys := []string{digest}
	if ref != digest {
		keys = append(keys, ref)
	}
	for _, k := range keys {
		rec := manifestRecord{Repo: repo, Reference: k, ContentType: contentType, Digest: digest, Manifest: body}
		if err := s.write(rec); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) recordPath(repo, ref string) string {
	sum := sha256.Sum256([]byte(repo + "\x00" + ref))
	return filepath.Join(s.dir, "manifests", hex.EncodeToString(sum[:])+".json")
}

// write stores rec atomically: a complete file or none, synced before the
// push is acknowledged.
func (s *Server) write(rec manifestRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return writeFileAtomic(s.recordPath(rec.Repo, rec.Reference), data)
}

func (s *Server) remove(repo, ref string) error {
	if err := os.Remove(s.recordPath(repo, ref)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Join(s.dir, "manifests"))
}

// replay feeds every persisted manifest back through the upstream handler.
// Images go before indexes (an index PUT needs its manifests present), and a
// digest key removed by a DELETE while a tag still names the manifest is
// removed again after the tag's PUT recreated it.
func (s *Server) replay() error {
	dir := filepath.Join(s.dir, "manifests")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("registry store: %w", err)
	}
	var recs []manifestRecord
	have := map[[2]string]bool{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			_ = os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("registry store: %w", err)
		}
		var rec manifestRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			return fmt.Errorf("registry store: manifest record %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(rec.Manifest)
		if got := "sha256:" + hex.EncodeToString(sum[:]); got != rec.Digest {
			return fmt.Errorf("registry store: manifest record %s is corrupt (digest %s, recorded %s)", e.Name(), got, rec.Digest)
		}
		recs = append(recs, rec)
		have[[2]string{rec.Repo, rec.Reference}] = true
	}
	sort.SliceStable(recs, func(i, j int) bool {
		return !types.MediaType(recs[i].ContentType).IsIndex() && types.MediaType(recs[j].ContentType).IsIndex()
	})
	// An index of indexes needs its children first; a few passes settle any
	// nesting that occurs in practice.
	pending := recs
	for pass := 0; len(pending) > 0; pass++ {
		var failed []manifestRecord
		var lastErr string
		for _, rec := range pending {
			if code, msg := s.serveInner(http.MethodPut, rec.Repo, rec.Reference, rec.ContentType, rec.Manifest); code != http.StatusCreated {
				failed = append(failed, rec)
				lastErr = fmt.Sprintf("%s:%s: %d %s", rec.Repo, rec.Reference, code, msg)
			}
		}
		if len(failed) == len(pending) || pass > 8 {
			return fmt.Errorf("registry store: %d manifests could not be restored; last: %s", len(failed), lastErr)
		}
		pending = failed
	}
	for _, rec := range recs {
		if rec.Reference == rec.Digest || have[[2]string{rec.Repo, rec.Digest}] {
			continue
		}
		s.serveInner(http.MethodDelete, rec.Repo, rec.Digest, "", nil)
		have[[2]string{rec.Repo, rec.Digest}] = true
	}
	return nil
}

func (s *Server) serveInner(method, repo, ref, contentType string, body []byte) (int, string) {
	req := httptest.NewRequest(method, "/v2/"+repo+"/manifests/"+ref, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	s.inner.ServeHTTP(rec, req)
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

// diskBlobs stores blobs as dir/<algorithm>/<hex>, like go-containerregistry's
// disk handler, but syncs each blob before it is acknowledged (a manifest is
// only as durable as the blobs it names) and removes a failed upload's
// temporary file.
type diskBlobs struct{ dir string }

func (d *diskBlobs) path(h v1.Hash) string { return filepath.Join(d.dir, h.Algorithm, h.Hex) }

// Stat implements registry.BlobStatHandler. Blobs are verified as they are
// written, so the size is all a HEAD needs.
func (d *diskBlobs) Stat(_ context.Context, _ string, h v1.Hash) (int64, error) {
	fi, err := os.Stat(d.path(h))
	if errors.Is(err, os.ErrNotExist) {
		return 0, ggcr.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Get implements registry.BlobHandler.
func (d *diskBlobs) Get(_ context.Context, _ string, h v1.Hash) (io.ReadCloser, error) {
	f, err := os.Open(d.path(h))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ggcr.ErrNotFound
	}
	return f, err
}

// Put implements registry.BlobPutHandler. rc verifies size and digest as it
// is read; its error is returned as is so the upstream handler answers with
// the right status.
func (d *diskBlobs) Put(_ context.Context, _ string, h v1.Hash, rc io.ReadCloser) error {
	defer rc.Close()
	if err := os.MkdirAll(filepath.Join(d.dir, h.Algorithm), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Join(d.dir, h.Algorithm), ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = io.Copy(f, rc)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, d.path(h))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Join(d.dir, h.Algorithm))
}

// Delete implements registry.BlobDeleteHandler.
func (d *diskBlobs) Delete(_ context.Context, _ string, h v1.Hash) error {
	err := os.Remove(d.path(h))
	if errors.Is(err, os.ErrNotExist) {
		return ggcr.ErrNotFound
	}
	return err
}

func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}
