package build

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// history is the hello repository: two commits on main, a feature branch
// merged into main with --no-ff (so its commit is a second parent only), and
// a user's checkout left dirty with a change that does not even compile.
type history struct {
	r                    *repo
	c1, c2, side, merged string
}

func helloHistory(t *testing.T) history {
	t.Helper()
	r := newRepo(t)
	h := history{r: r}
	h.c1 = r.commit("v1", helloFiles("1"))
	h.c2 = r.commit("v2", helloFiles("2"))
	r.git("checkout", "-q", "-b", "feature")
	h.side = r.commit("v3", helloFiles("3"))
	r.git("checkout", "-q", "main")
	r.git("merge", "-q", "--no-ff", "-m", "merge feature", "feature")
	h.merged = r.git("rev-parse", "HEAD")
	r.write(map[string]string{
		"internal/version/version.go": "package version\n\nconst V = \"uncommitted\"\n",
		"services/hello/broken.go":    "package main\n\nfunc broken( {\n",
	})
	return h
}

func TestGoBuildsPullableRunnableImages(t *testing.T) {
	t.Parallel()
	h := helloHistory(t)
	ctx := context.Background()
	cases := []struct {
		commit string
		gen    int64
		want   string
	}{
		{h.c1, 1, "hello 1 from-test"},
		{h.c2, 2, "hello 2 from-test"},
		{h.merged, 3, "hello 3 from-test"},
	}
	digests := map[string]map[string]string{} // registry -> commit -> digest
	for _, reg := range registries(t) {
		t.Run(reg.name, func(t *testing.T) {
			host, err := reg.opts.Host()
			if err != nil {
				t.Fatal(err)
			}
			g := &Go{Options: Options{Registry: reg.opts, Env: offline}}
			digests[reg.name] = map[string]string{}
			var prev int64
			for _, c := range cases {
				var out bytes.Buffer
				b, err := g.Build(ctx, Request{Module: "hello", Commit: c.commit, Repo: h.r.dir, Path: "services/hello", Source: "example.com/mesh.git", Output: &out})
				if err != nil {
					t.Fatalf("build %s: %v\noutput:\n%s", c.commit, err, out.String())
				}
				digests[reg.name][c.commit] = b.Digest
				if b.Module != "hello" || b.Commit != c.commit || b.Image != host+"/meshroll/hello" {
					t.Errorf("build = %+v", b)
				}
				if b.Generation != c.gen || b.Generation <= prev {
					t.Errorf("generation of %s = %d, want %d (after %d)", c.commit, b.Generation, c.gen, prev)
				}
				prev = b.Generation

				img := pull(t, reg.opts, b.Ref())
				checkImage(t, h.r, img, c.commit, b.Digest)
				bin, hdr := layerFile(t, img, "app/hello")
				if hdr.Mode != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 {
					t.Errorf("binary entry mode %o uid %d gid %d", hdr.Mode, hdr.Uid, hdr.Gid)
				}
				if got := runBinary(t, bin, "from-test"); got != c.want {
					t.Errorf("pulled %s prints %q, want %q", b.Ref(), got, c.want)
				}
			}
		})
	}
	// The image is a function of the commit, not of the registry.
	for _, c := range cases {
		if a, b := digests["embedded"][c.commit], digests["httptest"][c.commit]; a != b {
			t.Errorf("commit %s: digest %s in one registry, %s in the other", c.commit, a, b)
		}
	}
}

func checkImage(t *testing.T, r *repo, img v1.Image, commit, digest string) {
	t.Helper()
	d, err := img.Digest()
	if err != nil || d.String() != digest {
		t.Errorf("pulled digest %v (%v), want %s", d, err, digest)
	}
	mt, _ := img.MediaType()
	if mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s", mt)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	ct, err := time.Parse(time.RFC3339, r.git("show", "-s", "--format=%cI", commit))
	if err != nil {
		t.Fatal(err)
	}
	wantAnn := map[string]string{
		AnnotationRevision: commit,
		AnnotationSource:   "example.com/mesh.git",
		AnnotationCreated:  ct.UTC().Format(time.RFC3339),
		AnnotationTitle:    "hello",
	}
	for k, v := range wantAnn {
		if m.Annotations[k] != v {
			t.Errorf("manifest annotation %s = %q, want %q", k, m.Annotations[k], v)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "/app/hello" {
		t.Errorf("entrypoint %q", got)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	if !cf.Created.Time.Equal(ct) {
		t.Errorf("created %s, want commit time %s", cf.Created.Time, ct)
	}
	for k, v := range wantAnn {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
}

func TestGoSameCommitSameDigest(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the standard library with an empty cache")
	}
	h := helloHistory(t)
	regs := registries(t)
	ctx := context.Background()
	// Two clones of one repository whose origins are spelled differently,
	// as two workers' clones may be: nothing of a clone is in the image.
	h.r.git("remote", "add", "origin", "https://git.example.com/org/mesh.git")
	other := &repo{t: t, dir: t.TempDir()}
	other.git("clone", "-q", h.r.dir, other.dir)
	other.git("remote", "set-url", "origin", "ssh://git@git.example.org/fork/mesh")
	r := Request{Module: "hello", Commit: h.c1, Repo: h.r.dir, Path: "services/hello"}
	first, err := (&Go{Options: Options{Registry: regs[0].opts, Env: offline}}).Build(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	// A second build from the other clone, in a fresh worktree with an
	// empty build cache, into another registry, so that nothing is reused:
	// the bytes must come out the same on their own.
	var out bytes.Buffer
	r.Output = &out
	r.Repo = other.dir
	fresh, err := (&Go{Options: Options{Registry: regs[1].opts, Env: append(offline[:len(offline):len(offline)], "GOCACHE="+t.TempDir())}}).Build(ctx, r)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if fresh.Digest != first.Digest || fresh.Generation != first.Generation {
		t.Errorf("same commit built from two clones: %+v then %+v", first, fresh)
	}
	r.Repo = h.r.dir
	if !strings.Contains(out.String(), "meshroll: pushing") {
		t.Errorf("build into a fresh registry did not push; output:\n%s", out.String())
	}
	// A retry into the first registry finds its image there.
	out.Reset()
	again, err := (&Go{Options: Options{Registry: regs[0].opts, Env: offline}}).Build(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Errorf("retried build: %+v, first %+v", again, first)
	}
	if !strings.Contains(out.String(), "already in the registry; not pushing") || strings.Contains(out.String(), "meshroll: pushing") {
		t.Errorf("retried build pushed again; output:\n%s", out.String())
	}
}

func TestGoRefusesCommitOffMainLine(t *testing.T) {
	t.Parallel()
	h := helloHistory(t)
	reg := registries(t)[1]
	_, err := (&Go{Options: Options{Registry: reg.opts, Env: offline}}).Build(context.Background(),
		Request{Module: "hello", Commit: h.side, Repo: h.r.dir, Path: "services/hello"})
	if err == nil || !IsPermanent(err) {
		t.Fatalf("err = %v, want a permanent error", err)
	}
	for _, want := range []string{"commit " + h.side + " is not on the main line", "(branch main)", "build merged commits only"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestGoCompileErrorIsPermanentWithCompilerMessage(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	files := helloFiles("1")
	files["services/hello/main.go"] = "package main\n\nfunc main() {\n\tprintln(undefinedThing)\n}\n"
	c := r.commit("broken", files)
	reg := registries(t)[1]
	var out bytes.Buffer
	_, err := (&Go{Options: Options{Registry: reg.opts, Env: offline}}).Build(context.Background(),
		Request{Module: "hello", Commit: c, Repo: r.dir, Path: "services/hello", Output: &out})
	if err == nil || !IsPermanent(err) {
		t.Fatalf("err = %v, want a permanent error", err)
	}
	for _, want := range []string{"go build . failed", "undefined: undefinedThing", "last lines of output"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if !strings.Contains(out.String(), "undefined: undefinedThing") {
		t.Errorf("compiler output was not streamed:\n%s", out.String())
	}
}

func TestGoUnreachableRegistryIsRetryable(t *testing.T) {
	t.Parallel()
	h := helloHistory(t)
	addr := closedAddr(t)
	_, err := (&Go{Options: Options{Registry: registryAt(addr), Env: offline}}).Build(context.Background(),
		Request{Module: "hello", Commit: h.c1, Repo: h.r.dir, Path: "services/hello"})
	if err == nil || IsPermanent(err) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
	if !strings.Contains(err.Error(), "registry "+addr+" unreachable") {
		t.Errorf("error %q does not name the registry address %s", err, addr)
	}
}

func TestGoProgressAndOutput(t *testing.T) {
	t.Parallel()
	h := helloHistory(t)
	reg := registries(t)[1]
	var beats atomic.Int64
	var out bytes.Buffer
	_, err := (&Go{Options: Options{Registry: reg.opts, Env: offline, ProgressInterval: 5 * time.Millisecond}}).Build(context.Background(),
		Request{Module: "hello", Commit: h.c2, Repo: h.r.dir, Path: "services/hello", Output: &out, Progress: func() { beats.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	n := beats.Load()
	if n < 2 {
		t.Errorf("progress called %d times during a build", n)
	}
	time.Sleep(30 * time.Millisecond)
	if beats.Load() != n {
		t.Error("progress called after Build returned")
	}
	for _, want := range []string{"meshroll: checking out", "meshroll: go build -trimpath", "meshroll: pushing", "meshroll: built"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestGoRefusesBadRequests(t *testing.T) {
	t.Parallel()
	h := helloHistory(t)
	reg := registries(t)[1]
	base := Request{Module: "hello", Commit: h.c1, Repo: h.r.dir, Path: "services/hello"}
	cases := []struct {
		name string
		edit func(*Request)
		want string
	}{
		{"module name", func(r *Request) { r.Module = "Hello/World" }, "module name"},
		{"short commit", func(r *Request) { r.Commit = h.c1[:12] }, "not a full commit id"},
		{"unknown commit", func(r *Request) { r.Commit = strings.Repeat("ab", 20) }, "not in repository"},
		{"path escapes", func(r *Request) { r.Path = "../elsewhere" }, "inside the repository"},
		{"main absolute", func(r *Request) { r.Main = "/usr/bin" }, "inside the repository"},
		{"missing path", func(r *Request) { r.Path = "services/nope" }, "not a directory at commit"},
		{"missing main", func(r *Request) { r.Main = "cmd/nope" }, "go build ./cmd/nope failed"},
		{"unknown branch", func(r *Request) { r.Branch = "trunk" }, "main line branch trunk not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := base
			c.edit(&r)
			_, err := (&Go{Options: Options{Registry: reg.opts, Env: offline}}).Build(context.Background(), r)
			if err == nil || !IsPermanent(err) {
				t.Fatalf("err = %v, want a permanent error", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}

// TestGoBuildsWithMainInSubpackage builds the same program naming the
// module's root as Path and the main package as Main. The binary, and so the
// layer, is the same bytes: where the go command runs leaves no trace.
func TestGoBuildsWithMainInSubpackage(t *testing.T) {
	t.Parallel()
	h := helloHistory(t)
	reg := registries(t)[1]
	g := &Go{Options: Options{Registry: reg.opts, Env: offline}}
	ctx := context.Background()
	a, err := g.Build(ctx, Request{Module: "hello", Commit: h.c2, Repo: h.r.dir, Path: "services/hello"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Build(ctx, Request{Module: "hello", Commit: h.c2, Repo: h.r.dir, Path: ".", Main: "services/hello"})
	if err != nil {
		t.Fatal(err)
	}
	imgB := pull(t, reg.opts, b.Ref())
	bin, _ := layerFile(t, imgB, "app/hello")
	if got := runBinary(t, bin); got != "hello 2" {
		t.Errorf("binary prints %q", got)
	}
	layerDigest := func(ref string) string {
		ls, err := pull(t, reg.opts, ref).Layers()
		if err != nil {
			t.Fatal(err)
		}
		d, err := ls[0].Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	if la, lb := layerDigest(a.Ref()), layerDigest(b.Ref()); la != lb {
		t.Errorf("layer %s built from services/hello, %s from . with main services/hello", la, lb)
	}
}

func TestSelectDispatchesOnKind(t *testing.T) {
	var got []string
	rec := func(kind string) Builder {
		return builderFunc(func(r Request) { got = append(got, kind) })
	}
	s := Select{KindGo: rec(KindGo), KindCommand: rec(KindCommand)}
	ctx := context.Background()
	for _, k := range []string{"", KindGo, KindCommand} {
		if _, err := s.Build(ctx, Request{Kind: k}); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(got, ",") != "go,go,command" {
		t.Errorf("dispatched to %v", got)
	}
	_, err := s.Build(ctx, Request{Module: "m", Kind: "nix"})
	if err == nil || !IsPermanent(err) || !strings.Contains(err.Error(), `no builder of kind "nix"`) {
		t.Errorf("unknown kind: %v", err)
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}
