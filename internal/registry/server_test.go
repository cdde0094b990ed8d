package registry

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// serve opens the registry stored in dir (what names the opening in a
// failure), deletes allowed unless opts say otherwise, and serves it
// in-process; both are closed when the test ends, or sooner by the caller,
// to open the directory again.
func serve(t *testing.T, dir, what string, opts ...ServerOption) (*Server, *httptest.Server, client) {
	t.Helper()
	s, err := New(dir, append([]ServerOption{WithAccess(Access{Deletes: true})}, opts...)...)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		_ = s.Close()
	})
	return s, hs, client{t: t, opts: Options{Address: hs.URL}}
}

// start opens the registry stored in dir, deletes allowed, and starts it
// on a free loopback port, returning it and its URL; the caller closes it.
func start(t *testing.T, dir string) (*Server, string) {
	t.Helper()
	s, err := New(dir, WithAccess(Access{Deletes: true}))
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return s, url
}

// client is a registry as the tests reach it.
type client struct {
	t    *testing.T
	opts Options
}

func (c client) ref(s string) name.Reference {
	c.t.Helper()
	host, err := c.opts.Host()
	if err != nil {
		c.t.Fatal(err)
	}
	r, err := name.ParseReference(host+"/"+s, name.Insecure)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

func (c client) remote() []remote.Option {
	c.t.Helper()
	o, err := c.opts.Remote()
	if err != nil {
		c.t.Fatal(err)
	}
	return o
}

func (c client) push(ref string, img v1.Image) string {
	c.t.Helper()
	if err := remote.Write(c.ref(ref), img, c.remote()...); err != nil {
		c.t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		c.t.Fatal(err)
	}
	return d.String()
}

// manifest returns the raw manifest served for ref, or the status error.
func (c client) manifest(ref string) ([]byte, error) {
	c.t.Helper()
	d, err := remote.Get(c.ref(ref), c.remote()...)
	if err != nil {
		return nil, err
	}
	return d.Manifest, nil
}

func isNotFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}

func randomImage(t *testing.T) v1.Image {
	t.Helper()
	img, err := random.Image(256, 2)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// layerBytes reads every layer of the image at ref, which verifies each
// against its digest.
func (c client) layerBytes(ref string) [][]byte {
	c.t.Helper()
	img, err := remote.Image(c.ref(ref), c.remote()...)
	if err != nil {
		c.t.Fatalf("pull %s: %v", ref, err)
	}
	layers, err := img.Layers()
	if err != nil {
		c.t.Fatal(err)
	}
	var out [][]byte
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			c.t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			c.t.Fatalf("layer of %s: %v", ref, err)
		}
		out = append(out, b)
	}
	return out
}

func TestServerKeepsImagesAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	s1, url := start(t, dir)
	before := client{t: t, opts: Options{Address: url}}

	tagged := randomImage(t)
	taggedDigest := before.push("meshroll/a:v1", tagged)
	byDigest := randomImage(t)
	byDigestDigest, _ := byDigest.Digest()
	before.push("meshroll/a@"+byDigestDigest.String(), byDigest)
	idx, err := random.Index(128, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(before.ref("meshroll/idx:latest"), idx, before.remote()...); err != nil {
		t.Fatal(err)
	}
	idxDigest, _ := idx.Digest()
	before.push("meshroll/b:gone", randomImage(t))
	if err := remote.Delete(before.ref("meshroll/b:gone"), before.remote()...); err != nil {
		t.Fatal(err)
	}
	// Deleting by digest removes the manifest and every tag naming it.
	goneDigest := before.push("meshroll/b:also-gone", randomImage(t))
	if err := remote.Delete(before.ref("meshroll/b@"+goneDigest), before.remote()...); err != nil {
		t.Fatal(err)
	}
	before.push("meshroll/b:kept", randomImage(t))

	refs := []string{
		"meshroll/a:v1", "meshroll/a@" + taggedDigest, "meshroll/a@" + byDigestDigest.String(),
		"meshroll/idx:latest", "meshroll/idx@" + idxDigest.String(), "meshroll/b:kept",
	}
	want := map[string][]byte{}
	for _, r := range refs {
		if want[r], err = before.manifest(r); err != nil {
			t.Fatalf("before restart, %s: %v", r, err)
		}
	}
	wantLayers := before.layerBytes("meshroll/a:v1")
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	// Restarted, and this time served in-process through Handler.
	_, _, after := serve(t, dir, "restart")
	for _, r := range refs {
		got, err := after.manifest(r)
		if err != nil {
			t.Errorf("after restart, %s: %v", r, err)
			continue
		}
		if !bytes.Equal(got, want[r]) {
			t.Errorf("after restart, %s serves other bytes", r)
		}
	}
	gotLayers := after.layerBytes("meshroll/a@" + taggedDigest)
	if len(gotLayers) != len(wantLayers) {
		t.Fatalf("%d layers after restart, %d before", len(gotLayers), len(wantLayers))
	}
	for i := range gotLayers {
		if !bytes.Equal(gotLayers[i], wantLayers[i]) {
			t.Errorf("layer %d differs after restart", i)
		}
	}
	for _, r := range []string{"meshroll/b:gone", "meshroll/b:also-gone", "meshroll/b@" + goneDigest} {
		if _, err := after.manifest(r); !isNotFound(err) {
			t.Errorf("deleted %s after restart: %v, want not found", r, err)
		}
	}
}

func TestServerConcurrentPushesReplayToTheLastTag(t *testing.T) {
	dir := t.TempDir()
	_, hs, c := serve(t, dir, "open")
	imgs := make([]v1.Image, 6)
	for i := range imgs {
		imgs[i] = randomImage(t)
	}
	var wg sync.WaitGroup
	for i, img := range imgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := remote.Write(c.ref("meshroll/c:t"), img, c.remote()...); err != nil {
				t.Errorf("push %d: %v", i, err)
			}
			if err := remote.Write(c.ref(fmt.Sprintf("meshroll/c:own-%d", i)), img, c.remote()...); err != nil {
				t.Errorf("push %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	last, err := c.manifest("meshroll/c:t")
	if err != nil {
		t.Fatal(err)
	}
	hs.Close()

	_, _, c2 := serve(t, dir, "restart")
	got, err := c2.manifest("meshroll/c:t")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, last) {
		t.Error("tag pushed concurrently replays to another manifest than it served")
	}
	for i := range imgs {
		if _, err := c2.manifest(fmt.Sprintf("meshroll/c:own-%d", i)); err != nil {
			t.Errorf("own-%d: %v", i, err)
		}
	}
}

// TestServerRestartsAfterDeletingAnIndexChild is the sequence that once
// kept the worker from starting: an image, an index naming it, the image's
// manifest deleted (the API allows it; the index is still served), restart.
func TestServerRestartsAfterDeletingAnIndexChild(t *testing.T) {
	dir := t.TempDir()
	s1, hs, c := serve(t, dir, "open")
	child := randomImage(t)
	d, err := child.Digest()
	if err != nil {
		t.Fatal(err)
	}
	childDigest := c.push("meshroll/i@"+d.String(), child) // by digest: no tag keeps it
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: child})
	if err := remote.WriteIndex(c.ref("meshroll/i:index"), idx, c.remote()...); err != nil {
		t.Fatal(err)
	}
	if err := remote.Delete(c.ref("meshroll/i@"+childDigest), c.remote()...); err != nil {
		t.Fatalf("delete the index's child: %v", err)
	}
	want, err := c.manifest("meshroll/i:index")
	if err != nil {
		t.Fatalf("index after its child was deleted: %v", err)
	}
	hs.Close()
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	_, _, c2 := serve(t, dir, "restart after deleting an index's child")
	got, err := c2.manifest("meshroll/i:index")
	if err != nil {
		t.Fatalf("index after restart: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Error("index serves other bytes after restart")
	}
	if _, err := c2.manifest("meshroll/i@" + childDigest); !isNotFound(err) {
		t.Errorf("deleted child after restart: %v, want not found", err)
	}
	// And the registry still takes pushes.
	c2.push("meshroll/i@"+childDigest, child)
}

// TestServerRefusesAManifestUnderAnotherDigest: a manifest PUT to a digest
// that is not its own is refused, and nothing is stored under that key.
func TestServerRefusesAManifestUnderAnotherDigest(t *testing.T) {
	dir := t.TempDir()
	_, hs, c := serve(t, dir, "open")
	img := randomImage(t)
	c.push("meshroll/d:real", img)
	raw, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	mt, err := img.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	other := randomImage(t)
	otherDigest, _ := other.Digest()
	put := func(ref string) int {
		req, _ := http.NewRequest(http.MethodPut, hs.URL+"/v2/meshroll/d/manifests/"+ref, bytes.NewReader(raw))
		req.Header.Set("Content-Type", string(mt))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := put(otherDigest.String()); code != http.StatusBadRequest {
		t.Errorf("PUT under another digest answered %d, want 400", code)
	}
	if _, err := c.manifest("meshroll/d@" + otherDigest.String()); !isNotFound(err) {
		t.Errorf("manifest under the wrong digest: %v, want not found", err)
	}
	if code := put("v1"); code != http.StatusCreated {
		t.Errorf("the same manifest under a tag answered %d, want 201", code)
	}
}

// TestServerRefusesTheEarlierLayout: a state directory written by the
// hand-written registry of earlier meshroll versions is named, not served
// as an empty registry.
func TestServerRefusesTheEarlierLayout(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "manifests"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := New(dir)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "move that directory aside") {
		t.Fatalf("New on the earlier layout: %v", err)
	}
}

func TestServerFailedBlobUploadLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	_, hs, _ := serve(t, dir, "open")
	// An upload whose body does not match the digest it is closed with.
	resp, err := http.Post(hs.URL+"/v2/meshroll/a/blobs/uploads/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		t.Fatalf("upload started without a Location (%d): %v", resp.StatusCode, err)
	}
	q := loc.Query()
	q.Set("digest", "sha256:"+strings.Repeat("0", 64))
	loc.RawQuery = q.Encode()
	req, _ := http.NewRequest(http.MethodPut, loc.String(), strings.NewReader("not that"))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("mismatched upload answered %d, want 400", resp.StatusCode)
	}
	var left []string
	_ = filepath.WalkDir(filepath.Join(dir, "docker", "registry", "v2", "blobs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) != 0 {
		t.Errorf("failed upload left blobs %v", left)
	}
}

func TestServerLifecycle(t *testing.T) {
	dir := t.TempDir()
	// Closed right after Start: the listener must not outlive Close.
	s, url := start(t, dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get(url + "/v2/"); err == nil {
		_ = resp.Body.Close()
		t.Error("registry still answers after Close")
	}
	if _, err := s.Start("127.0.0.1:0"); err == nil {
		t.Error("a closed Server started again")
	}

	// ListenAndServe returns nil once closed.
	s2, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s2.ListenAndServe("127.0.0.1:0") }()
	for s2.Addr() == "" {
		time.Sleep(time.Millisecond)
	}
	resp, err := http.Get("http://" + s2.Addr() + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v2/ = %d", resp.StatusCode)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("ListenAndServe after Close: %v", err)
	}
}

// TestServerRestartsAfterAnySequence: seeded random sequences of the API
// calls meshroll and other clients make (images and indexes pushed by tag
// and by digest, manifests deleted by digest and by tag, a tag moved), each
// followed by a restart that must open and serve exactly what was served
// before it: every tag's manifest and every digest pushed, or its absence.
func TestServerRestartsAfterAnySequence(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 0))
			dir := t.TempDir()
			s, hs, c := serve(t, dir, "open")
			repos := []string{"meshroll/a", "meshroll/b"}
			var pushed []string // repo@digest of every manifest pushed
			var tags []string   // repo:tag ever pushed
			var ops []string
			for i := range 30 {
				repo := repos[rng.IntN(len(repos))]
				switch op := rng.IntN(6); {
				case op <= 1 || len(pushed) == 0: // an image by tag
					tag := fmt.Sprintf("%s:t%d", repo, rng.IntN(4))
					pushed = append(pushed, repo+"@"+c.push(tag, randomImage(t)))
					tags = append(tags, tag)
					ops = append(ops, "push "+tag)
				case op == 2: // an image by digest only
					img := randomImage(t)
					d, _ := img.Digest()
					pushed = append(pushed, repo+"@"+c.push(repo+"@"+d.String(), img))
					ops = append(ops, "push "+repo+"@digest")
				case op == 3: // an index of one or two of this repository's images
					var children []v1.Image
					for _, p := range pushed {
						if strings.HasPrefix(p, repo+"@") && len(children) < 2 {
							if img, err := remote.Image(c.ref(p), c.remote()...); err == nil {
								children = append(children, img)
							}
						}
					}
					if len(children) == 0 {
						continue
					}
					var idx v1.ImageIndex = empty.Index
					for _, ch := range children {
						idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: ch})
					}
					tag := fmt.Sprintf("%s:idx%d", repo, i)
					if err := remote.WriteIndex(c.ref(tag), idx, c.remote()...); err != nil {
						t.Fatalf("after %v: push index: %v", ops, err)
					}
					d, _ := idx.Digest()
					pushed = append(pushed, repo+"@"+d.String())
					tags = append(tags, tag)
					ops = append(ops, "index "+tag)
				case op == 4: // delete a manifest by digest
					victim := pushed[rng.IntN(len(pushed))]
					_ = remote.Delete(c.ref(victim), c.remote()...) // may be gone already
					ops = append(ops, "delete "+victim)
				default: // delete a tag
					if len(tags) == 0 {
						continue
					}
					victim := tags[rng.IntN(len(tags))]
					_ = remote.Delete(c.ref(victim), c.remote()...)
					ops = append(ops, "untag "+victim)
				}
			}
			before := served(c, append(pushed, tags...))
			hs.Close()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			_, _, c2 := serve(t, dir, fmt.Sprintf("restart after %v", ops))
			after := served(c2, append(pushed, tags...))
			for ref, want := range before {
				if got := after[ref]; got != want {
					t.Errorf("after %v and a restart, %s serves %q, before %q", ops, ref, got, want)
				}
			}
		})
	}
}

// served is what each ref answers: its manifest's bytes, or the error.
func served(c client, refs []string) map[string]string {
	out := map[string]string{}
	for _, r := range refs {
		b, err := c.manifest(r)
		if err != nil {
			var te *transport.Error
			if errors.As(err, &te) {
				out[r] = fmt.Sprintf("status %d", te.StatusCode)
			} else {
				out[r] = err.Error()
			}
			continue
		}
		out[r] = string(b)
	}
	return out
}

// The catalog and tag lists answer as the CNCF registry's do with its
// defaults: a pushed repository is listed, and a page size is accepted.
func TestServerListsRepositoriesAndTags(t *testing.T) {
	_, hs, c := serve(t, t.TempDir(), "open")
	c.push("meshroll/host:c1", randomImage(t))
	for path, want := range map[string]string{
		"/v2/_catalog":                    `"meshroll/host"`,
		"/v2/_catalog?n=10":               `"meshroll/host"`,
		"/v2/meshroll/host/tags/list":     `"c1"`,
		"/v2/meshroll/host/tags/list?n=5": `"c1"`,
	} {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d %s, want 200 listing %s", path, resp.StatusCode, body, want)
		}
	}
}

// A registry closed right after it started leaves its address free when
// Close returns: restarted on the same address at once, it serves. (A
// Close before Serve had begun left the port to be let go later, by
// Serve's own goroutine.)
func TestCloseFreesTheAddressAtOnce(t *testing.T) {
	dir := t.TempDir()
	addr := "127.0.0.1:0"
	for i := range 50 {
		s, err := New(dir)
		if err != nil {
			t.Fatal(err)
		}
		url, err := s.Start(addr)
		if err != nil {
			t.Fatalf("start %d on %s: %v", i, addr, err)
		}
		addr = strings.TrimPrefix(url, "http://")
		if err := s.Close(); err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
	}
}
