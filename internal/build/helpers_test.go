package build

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/registry"
)

// repo is a git repository made by a test.
type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir}, args...)...)
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t",
		"GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// write puts files (path -> content) into the working tree.
func (r *repo) write(files map[string]string) {
	r.t.Helper()
	for p, content := range files {
		full := filepath.Join(r.dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
}

// commit writes files and commits them, returning the commit id.
func (r *repo) commit(msg string, files map[string]string) string {
	r.t.Helper()
	r.write(files)
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// helloFiles is a two-package Go program in a module at the repository's
// root, built from services/hello like the example modules of this
// repository: the main package imports a package of its own module.
func helloFiles(version string) map[string]string {
	return map[string]string{
		"go.mod":                      "module example.com/mesh\n\ngo 1.22\n",
		"internal/version/version.go": "package version\n\n// V is the program's version.\nconst V = \"" + version + "\"\n",
		"services/hello/main.go": `package main

import (
	"fmt"
	"os"
	"strings"

	"example.com/mesh/internal/version"
)

func main() {
	fmt.Printf("hello %s %s\n", version.V, strings.Join(os.Args[1:], " "))
}
`,
	}
}

// offline is the go command environment of every test build: no module
// proxy, no go.mod edits, no toolchain download. A build that needed the
// network would fail.
var offline = []string{"GOPROXY=off", "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local", "GONOSUMDB=*", "GOSUMDB=off"}

type testRegistry struct {
	name string
	opts registry.Options
}

// registries are the two real registries builds are pushed to: the
// embedded one over HTTP on loopback, and go-containerregistry's in-memory
// handler behind httptest.
func registries(t *testing.T) []testRegistry {
	t.Helper()
	srv, err := registry.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	mem := httptest.NewServer(ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(mem.Close)
	return []testRegistry{
		{name: "embedded", opts: registry.Options{Address: addr}},
		{name: "httptest", opts: registry.Options{Address: mem.URL}},
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// pull fetches ref (image@digest) from the registry.
func pull(t *testing.T, opts registry.Options, ref string) v1.Image {
	t.Helper()
	ro, err := opts.Remote()
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.NewDigest(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r, ro...)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return img
}

// layerFile returns the content and header of file p in the image's only
// layer.
func layerFile(t *testing.T, img v1.Image, p string) ([]byte, *tar.Header) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("image has %d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("layer has no %s", p)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == p {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b, h
		}
	}
}

// runBinary writes the binary out and runs it with args.
func runBinary(t *testing.T, bin []byte, args ...string) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("images hold linux binaries")
	}
	p := filepath.Join(t.TempDir(), "app")
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// A fork elsewhere in the test binary (parallel tests start git and
	// go) can hold the just-written file open for a moment; exec then
	// fails with ETXTBSY (golang.org/issue/22315). Try again briefly.
	for attempt := 0; ; attempt++ {
		out, err := exec.Command(p, args...).CombinedOutput()
		if errors.Is(err, syscall.ETXTBSY) && attempt < 20 {
			time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("run pulled binary: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
}

func registryAt(addr string) registry.Options { return registry.Options{Address: addr} }

// builderFunc is a Builder that records the request.
type builderFunc func(Request)

func (f builderFunc) Build(_ context.Context, r Request) (mesh.Build, error) {
	f(r)
	return mesh.Build{Module: r.Module}, nil
}
