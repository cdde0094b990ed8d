package build

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// helperEnv makes the test binary act as a build command (see TestMain): a
// real recipe that builds an image from the checkout and pushes it, as ko
// or buildx would, without needing either on the machine.
const helperEnv = "MESHROLL_BUILD_TEST_HELPER"

// helperMain is the build command. args[0] is what to do; for "push",
// args[1] is how to report the digest (bare, ref, json).
func helperMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "helper: no mode")
		return 2
	}
	switch args[0] {
	case "fail":
		fmt.Fprintln(os.Stderr, "recipe broke: no rule to make target 'image'")
		return 2
	case "tempfail":
		fmt.Fprintln(os.Stderr, "registry flaked")
		return ExitTempFail
	case "nodigest":
		fmt.Println("built, but forgot to say what")
		return 0
	case "nopush":
		return writeDigest("sha256:" + strings.Repeat("0", 64))
	case "checkouts":
		// Check args[1] (a repository) out at args[2] args[3] times, as a
		// second worker process sharing the repository would.
		n, _ := strconv.Atoi(args[3])
		for range n {
			_, cleanup, err := Checkout(context.Background(), args[1], args[2])
			if err != nil {
				fmt.Fprintln(os.Stderr, "helper:", err)
				return 2
			}
			cleanup()
		}
		return 0
	case "env":
		// Print the environment's MESHROLL_ and TEMPORAL_ variables, then
		// fail: the test reads what a recipe from the repository could see.
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "MESHROLL_") || strings.HasPrefix(kv, "TEMPORAL_") {
				fmt.Println("env:", kv)
			}
		}
		return 2
	case "push":
	default:
		fmt.Fprintln(os.Stderr, "helper: unknown mode", args[0])
		return 2
	}
	version, err := os.ReadFile("VERSION")
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	fmt.Printf("building %s at %s (generation %s) from %s\n",
		os.Getenv("MESHROLL_MODULE"), os.Getenv("MESHROLL_COMMIT"), os.Getenv("MESHROLL_GENERATION"), strings.TrimSpace(string(version)))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "VERSION", Mode: 0o644, Size: int64(len(version)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(version)
	_ = tw.Close()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	tag, err := name.NewTag(os.Getenv("MESHROLL_IMAGE")+":"+os.Getenv("MESHROLL_COMMIT"), name.Insecure)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	if err := remote.Write(tag, img); err != nil {
		fmt.Fprintln(os.Stderr, "helper: push:", err)
		return ExitTempFail
	}
	d, _ := img.Digest()
	fmt.Printf("pushed %s@%s\n", tag.Context().Name(), d)
	switch args[1] {
	case "ref":
		return writeDigest(tag.String() + "@" + d.String())
	case "json":
		b, _ := json.Marshal(map[string]any{"containerimage.digest": d.String(), "image.name": tag.String()})
		return writeDigest(string(b))
	default:
		return writeDigest(d.String())
	}
}

func writeDigest(s string) int {
	p := os.Getenv("MESHROLL_DIGEST_FILE")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	if err := os.WriteFile(p, []byte(s+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	return 0
}

func TestCommandBuilder(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := newRepo(t)
	c1 := r.commit("v1", map[string]string{"svc/VERSION": "one\n"})
	c2 := r.commit("v2", map[string]string{"svc/VERSION": "two\n", "svc/out/digest.txt": "sha256:" + strings.Repeat("1", 64)})
	r.write(map[string]string{"svc/VERSION": "uncommitted\n"})

	reg := registries(t)[0]
	host, err := reg.opts.Host()
	if err != nil {
		t.Fatal(err)
	}
	target := host + "/meshroll/svc"
	b := &Command{Options: Options{Registry: reg.opts, Env: []string{helperEnv + "=1"}}}
	ctx := context.Background()
	cases := []struct {
		name       string
		commit     string
		args       []string
		digestFile string
		version    string
		gen        int64
	}{
		{"bare digest", c1, []string{"push", "bare"}, "", "one\n", 1},
		{"image reference", c2, []string{"push", "ref"}, "", "two\n", 2},
		{"buildx metadata", c1, []string{"push", "json"}, "", "one\n", 1},
		// The commit has a stale digest in out/digest.txt; it must not be
		// taken for this build's.
		{"digest file in checkout", c2, []string{"push", "bare"}, "out/digest.txt", "two\n", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			got, err := b.Build(ctx, Request{Module: "svc", Commit: c.commit, Repo: r.dir, Path: "svc", Kind: KindCommand,
				Command: append([]string{exe}, c.args...), DigestFile: c.digestFile, Output: &out})
			if err != nil {
				t.Fatalf("%v\noutput:\n%s", err, out.String())
			}
			if got.Image != target || got.Generation != c.gen || got.Commit != c.commit || got.Module != "svc" {
				t.Errorf("build = %+v", got)
			}
			if !strings.Contains(out.String(), fmt.Sprintf("building svc at %s (generation %d) from %s", c.commit, c.gen, strings.TrimSpace(c.version))) {
				t.Errorf("command output not streamed or environment wrong:\n%s", out.String())
			}
			content, _ := layerFile(t, pull(t, reg.opts, got.Ref()), "VERSION")
			if string(content) != c.version {
				t.Errorf("image holds VERSION %q, want %q (the commit's, not the user's checkout)", content, c.version)
			}
		})
	}

	failures := []struct {
		name      string
		args      []string
		permanent bool
		want      string
	}{
		{"command fails", []string{"fail"}, true, "recipe broke: no rule to make target 'image'"},
		{"command asks for retry", []string{"tempfail"}, false, "registry flaked"},
		{"no digest written", []string{"nodigest"}, true, "wrote no digest"},
		{"digest not pushed", []string{"nopush"}, true, "does not hold it"},
		{"empty command", nil, true, "command is empty"},
		{"program not found", []string{"no-such-build-tool-here"}, true, "program not found on this worker"},
	}
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			cmd := []string(nil)
			switch {
			case len(f.args) == 1 && strings.HasPrefix(f.args[0], "no-such"):
				cmd = f.args
			case f.args != nil:
				cmd = append([]string{exe}, f.args...)
			}
			_, err := b.Build(ctx, Request{Module: "svc", Commit: c1, Repo: r.dir, Path: "svc", Command: cmd})
			if err == nil {
				t.Fatal("build succeeded")
			}
			if IsPermanent(err) != f.permanent {
				t.Errorf("permanent = %v, want %v: %v", IsPermanent(err), f.permanent, err)
			}
			if !strings.Contains(err.Error(), f.want) {
				t.Errorf("error %q does not contain %q", err, f.want)
			}
		})
	}
}

func TestParseDigestFile(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	cases := []struct {
		in, image, digest, err string
	}{
		{in: d + "\n", digest: d},
		{in: "127.0.0.1:5000/meshroll/x:tag@" + d, image: "127.0.0.1:5000/meshroll/x", digest: d},
		{in: "127.0.0.1:5000/meshroll/x@" + d + "\nother line", image: "127.0.0.1:5000/meshroll/x", digest: d},
		{in: `{"containerimage.digest":"` + d + `","image.name":"r.example/a/b:1,r.example/a/b:2"}`, image: "r.example/a/b", digest: d},
		{in: "", err: "empty"},
		{in: "sha256:abc", err: "is not sha256"},
		{in: "x@sha512:" + strings.Repeat("a", 128), err: "is not sha256"},
		{in: `{"image.name":"x"}`, err: "no containerimage.digest"},
	}
	for _, c := range cases {
		image, digest, err := parseDigestFile([]byte(c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err = %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || image != c.image || digest != c.digest {
			t.Errorf("%q: got (%q, %q, %v), want (%q, %q)", c.in, image, digest, err, c.image, c.digest)
		}
	}
}

// A build command runs the repository's code: it must not see the worker's
// secrets, which reach the worker as MESHROLL_* and TEMPORAL_* variables.
func TestCommandDoesNotSeeWorkerSecrets(t *testing.T) {
	t.Setenv("MESHROLL_MACHINES_EDGE_1_TOKEN", "host-token-s3cret")
	t.Setenv("MESHROLL_REGISTRY_PASSWORD", "registry-s3cret")
	t.Setenv("TEMPORAL_API_KEY", "api-key-s3cret")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := newRepo(t)
	c1 := r.commit("one", map[string]string{"svc/VERSION": "one\n"})
	b := &Command{Options: Options{Env: []string{helperEnv + "=1"}}}
	var out bytes.Buffer
	_, err = b.Build(context.Background(), Request{Module: "svc", Commit: c1, Repo: r.dir, Path: "svc", Kind: KindCommand,
		Command: []string{exe, "env"}, Output: &out})
	if err == nil {
		t.Fatal("the env helper always fails; the build succeeded")
	}
	if !strings.Contains(out.String(), "env: MESHROLL_MODULE=svc") {
		t.Fatalf("the command did not run or lacks its own variables:\n%s", out.String())
	}
	if strings.Contains(out.String(), "s3cret") {
		t.Errorf("the build command saw a worker secret:\n%s", out.String())
	}
}

func TestWithoutSecrets(t *testing.T) {
	got := withoutSecrets([]string{"PATH=/bin", "MESHROLL_CATALOGUE_DSN=postgres://u:p@h/db", "meshroll_x=1",
		"TEMPORAL_API_KEY=k", "GOPROXY=off", "HOME=/root", "NOEQUALS"})
	want := []string{"PATH=/bin", "GOPROXY=off", "HOME=/root", "NOEQUALS"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("withoutSecrets = %q, want %q", got, want)
	}
}
