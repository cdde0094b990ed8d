// Package execrttest gives tests of the exec runtime (package execrt, and
// the agent running it) what they need to run real processes from real
// images: a small Go program to put in images, image building, and an
// in-process OCI registry that counts requests and can be told to lie. It
// lives apart from its users' tests so that the runtime's and the agent's
// tests use one program and one registry.
package execrttest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/meshroll/meshroll/internal/registry"
)

// AppPath is where App sits in the images AppImage makes.
const AppPath = "/app/testapp"

// appSource is the test program. Its first argument is the mode, its second
// a version it prints:
//
//	serve V             print, then block until SIGTERM; print "got SIGTERM", exit 0
//	exit N              print, then exit with code N
//	ignore-term V       print, ignore SIGTERM and block until killed
//	http V [STATUS]     print, then serve HTTP on 127.0.0.1:$MESHROLL_PORT,
//	                    answering every request STATUS (default 200) with
//	                    "testapp V status STATUS", or 500 "testapp V failing"
//	                    while the file $TESTAPP_FAIL_FILE exists (a probe
//	                    a test makes flap); until SIGTERM, as serve. It
//	                    listens on $TESTAPP_HOST instead of 127.0.0.1 when
//	                    set (0.0.0.0 in a container on a bridge)
//	http-exit V DUR     as http 200, then exit with code 1 after DUR (a Go
//	                    duration): healthy for a while, then gone
//	probe V CODE        print "probe V module $MESHROLL_MODULE exits CODE"
//	                    and exit CODE, printing nothing else: an exec probe
//
// Every mode but probe prints "testapp V mode M pid P", its working
// directory as "cwd D" and every variable of its environment as "env K=V",
// sorted.
const appSource = `package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"syscall"
	"time"
)

func main() {
	mode, version := "serve", "dev"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	if len(os.Args) > 2 {
		version = os.Args[2]
	}
	arg := ""
	if len(os.Args) > 3 {
		arg = os.Args[3]
	}
	if mode == "probe" {
		code, _ := strconv.Atoi(arg)
		fmt.Printf("probe %s module %s exits %d\n", version, os.Getenv("MESHROLL_MODULE"), code)
		os.Exit(code)
	}
	if mode == "ignore-term" {
		signal.Ignore(syscall.SIGTERM)
	}
	term := make(chan os.Signal, 1)
	if mode == "serve" || mode == "http" || mode == "http-exit" {
		signal.Notify(term, syscall.SIGTERM)
	}
	fmt.Printf("testapp %s mode %s pid %d\n", version, mode, os.Getpid())
	wd, _ := os.Getwd()
	fmt.Printf("cwd %s\n", wd)
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		fmt.Printf("env %s\n", kv)
	}
	switch mode {
	case "exit":
		code, _ := strconv.Atoi(version)
		os.Exit(code)
	case "ignore-term":
		fmt.Printf("testapp %s ignoring SIGTERM\n", version)
		for {
			time.Sleep(time.Hour)
		}
	case "http", "http-exit":
		status := 200
		if mode == "http" && arg != "" {
			status, _ = strconv.Atoi(arg)
		}
		fail := os.Getenv("TESTAPP_FAIL_FILE")
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			if _, err := os.Stat(fail); fail != "" && err == nil {
				w.WriteHeader(500)
				fmt.Fprintf(w, "testapp %s failing: %s exists\n", version, fail)
				return
			}
			w.WriteHeader(status)
			fmt.Fprintf(w, "testapp %s status %d\n", version, status)
		})
		host := os.Getenv("TESTAPP_HOST")
		if host == "" {
			host = "127.0.0.1"
		}
		addr := host + ":" + os.Getenv("MESHROLL_PORT")
		go func() {
			err := http.ListenAndServe(addr, nil)
			fmt.Printf("testapp %s: serve %s: %v\n", version, addr, err)
			os.Exit(2)
		}()
		fmt.Printf("testapp %s serving %s\n", version, addr)
		if mode == "http-exit" {
			d, _ := time.ParseDuration(arg)
			select {
			case <-term:
			case <-time.After(d):
				fmt.Printf("testapp %s exits after %s\n", version, d)
				os.Exit(1)
			}
		} else {
			<-term
		}
		fmt.Printf("testapp %s got SIGTERM\n", version)
	default:
		<-term
		fmt.Printf("testapp %s got SIGTERM\n", version)
	}
}
`

var app struct {
	once sync.Once
	bin  []byte
	err  error
	out  string
}

// App is the test program, a static binary for this machine, built once
// per test binary.
func App(t testing.TB) []byte {
	t.Helper()
	app.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			app.err = err
			return
		}
		dir, err := os.MkdirTemp("", "execrttest-")
		if err != nil {
			app.err = err
			return
		}
		defer os.RemoveAll(dir)
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module testapp\n\ngo 1.22\n"), 0o600); err != nil {
			app.err = err
			return
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(appSource), 0o600); err != nil {
			app.err = err
			return
		}
		cmd := exec.Command(goTool, "build", "-o", "testapp", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
		out, err := cmd.CombinedOutput()
		if err != nil {
			app.err, app.out = err, string(out)
			return
		}
		app.bin, app.err = os.ReadFile(filepath.Join(dir, "testapp"))
	})
	if app.err != nil {
		t.Fatalf("build the test program: %v\n%s", app.err, app.out)
	}
	return app.bin
}

// Entry is one tar entry of a layer Layer makes.
type Entry struct {
	Name     string
	Type     byte // tar.TypeReg when zero
	Mode     int64
	Linkname string
	Body     []byte
}

// Layer is a gzipped layer holding entries, in order.
func Layer(t testing.TB, entries ...Entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.Type
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.Mode
		if mode == 0 {
			mode = 0o644
			if typ == tar.TypeDir {
				mode = 0o755
			}
		}
		hdr := &tar.Header{Name: e.Name, Typeflag: typ, Mode: mode, Linkname: e.Linkname, Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.Body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("layer: %v", err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write(e.Body); err != nil {
				t.Fatalf("layer: %v", err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("layer: %v", err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		t.Fatalf("layer: %v", err)
	}
	return l
}

// Config is what AppImage and Image put in an image's config.
type Config struct {
	Entrypoint, Cmd, Env []string
	WorkingDir           string
}

// Image is an image of layers with config c, for this machine's platform.
func Image(t testing.TB, c Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatalf("image: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatalf("image: %v", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = runtime.GOOS, runtime.GOARCH
	cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.Env, cf.Config.WorkingDir = c.Entrypoint, c.Cmd, c.Env, c.WorkingDir
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatalf("image: %v", err)
	}
	return img
}

// AppImage is an image with App at AppPath as its Entrypoint, cmd as its
// Cmd (for example "serve", "v1") and env as its Env.
func AppImage(t testing.TB, env []string, cmd ...string) v1.Image {
	t.Helper()
	return Image(t, Config{Entrypoint: []string{AppPath}, Cmd: cmd, Env: env}, AppLayer(t))
}

var appLayer struct {
	once sync.Once
	l    v1.Layer
}

// AppLayer is the layer holding App at AppPath, made once: compressing the
// program is most of what building an image costs.
func AppLayer(t testing.TB) v1.Layer {
	t.Helper()
	bin := App(t)
	appLayer.once.Do(func() {
		appLayer.l = Layer(t,
			Entry{Name: "app/", Type: tar.TypeDir},
			Entry{Name: strings.TrimPrefix(AppPath, "/"), Mode: 0o755, Body: bin},
		)
	})
	return appLayer.l
}

// Registry is an in-process OCI registry (go-containerregistry's) served
// over HTTP on loopback.
type Registry struct {
	srv      *httptest.Server
	h        http.Handler
	requests atomic.Int64

	mu       sync.Mutex
	tampered map[string]bool   // blob digests served with a byte flipped
	lies     map[string][]byte // manifest digests served with other bytes
	down     bool              // every request answered 503
}

// Down has the registry answer every request 503 Service Unavailable
// (down is true), as a registry that is down behind its load balancer
// does, or serve again (false).
func (r *Registry) Down(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

// NewRegistry starts a registry, closed when t ends.
func NewRegistry(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{
		h:        ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))),
		tampered: map[string]bool{},
		lies:     map[string][]byte{},
	}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	return r
}

// Host is the registry's host:port, as image names carry it.
func (r *Registry) Host() string { return strings.TrimPrefix(r.srv.URL, "http://") }

// Options are registry options naming this registry.
func (r *Registry) Options() registry.Options {
	return registry.Options{Address: r.Host(), Insecure: true}
}

// Requests counts the requests the registry was sent.
func (r *Registry) Requests() int64 { return r.requests.Load() }

// Pushed is an image in the registry.
type Pushed struct {
	// Image is the repository without tag or digest, as declared.
	Image  string
	Digest string
	// Layers are the image's layer (blob) digests.
	Layers []string
}

// Push puts img into repo (for example "meshroll/web").
func (r *Registry) Push(t testing.TB, repo string, img v1.Image) Pushed {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	image := r.Host() + "/" + repo
	ref, err := name.NewDigest(image + "@" + d.String())
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	p := Pushed{Image: image, Digest: d.String()}
	ls, err := img.Layers()
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	for _, l := range ls {
		ld, err := l.Digest()
		if err != nil {
			t.Fatalf("push: %v", err)
		}
		p.Layers = append(p.Layers, ld.String())
	}
	return p
}

// Tamper makes the registry serve the blob with one byte flipped, as a
// corrupted disk or a hostile registry would.
func (r *Registry) Tamper(blob string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tampered[blob] = true
}

// Lie makes the registry answer a manifest request for digest with raw (and
// a Docker-Content-Digest header claiming digest).
func (r *Registry) Lie(digest string, raw []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lies[digest] = raw
}

// ServeHTTP counts the request, tells its lies and leaves the rest to the
// real registry.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	last := req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]
	r.mu.Lock()
	lie, lying := r.lies[last]
	tamper := r.tampered[last]
	down := r.down
	r.mu.Unlock()
	switch {
	case down:
		http.Error(w, "registry down", http.StatusServiceUnavailable)
	case lying && strings.Contains(req.URL.Path, "/manifests/"):
		w.Header().Set("Content-Type", string(mediaType(lie)))
		w.Header().Set("Docker-Content-Digest", last)
		w.WriteHeader(http.StatusOK)
		if req.Method != http.MethodHead {
			_, _ = w.Write(lie)
		}
	case tamper && strings.Contains(req.URL.Path, "/blobs/") && req.Method == http.MethodGet:
		rec := httptest.NewRecorder()
		r.h.ServeHTTP(rec, req)
		body := rec.Body.Bytes()
		if len(body) > 0 {
			body[len(body)/2] ^= 0xff
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	default:
		r.h.ServeHTTP(w, req)
	}
}

func mediaType(raw []byte) string {
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil || m.MediaType == "" {
		return "application/vnd.docker.distribution.manifest.v2+json"
	}
	return string(m.MediaType)
}

// Eventually waits until cond holds, checking every few milliseconds, and
// fails t after limit: for what a child process does (write its log, exit)
// that no update announces.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		<-tick.C
	}
}

// Digest is the sha256 digest of b, for declaring digests that exist
// nowhere.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
