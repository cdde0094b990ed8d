package testsuite

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

func imageMesh() stackOptions {
	o := exampleMesh()
	o.images = true
	return o
}

// execHostMesh is module host built into real images and run by the exec
// runtime on machines (hostFleet's, most often): the health, analysis and
// Prometheus tests' mesh, each adding its probe, tiers and checks.
func execHostMesh(machines []machineSpec) stackOptions {
	o := imageMesh()
	o.exec = true
	o.modules = []string{"host"}
	o.machines = machines
	return o
}

// pullAndRun pulls a build's image by digest from the stack's registry,
// takes the binary out of its layer and runs it, returning what it printed.
func (s *stack) pullAndRun(b mesh.Build) (string, map[string]string) {
	s.t.Helper()
	ref, err := name.ParseReference(b.Image + "@" + b.Digest)
	require.NoError(s.t, err)
	opts, err := s.registry.Remote()
	require.NoError(s.t, err)
	img, err := remote.Image(ref, opts...)
	require.NoError(s.t, err)
	got, err := img.Digest()
	require.NoError(s.t, err)
	require.Equal(s.t, b.Digest, got.String(), "the registry serves the image by its digest")
	m, err := img.Manifest()
	require.NoError(s.t, err)
	layers, err := img.Layers()
	require.NoError(s.t, err)
	require.Len(s.t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(s.t, err)
	defer rc.Close()
	bin := filepath.Join(s.t.TempDir(), b.Module)
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(s.t, err)
		if strings.HasSuffix(h.Name, "/"+b.Module) && h.Typeflag == tar.TypeReg {
			f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
			require.NoError(s.t, err)
			_, err = io.Copy(f, tr)
			require.NoError(s.t, err)
			require.NoError(s.t, f.Close())
		}
	}
	// The worker in this process forks git and go; one of those children
	// can hold the just-written binary open for a moment, and exec then
	// fails with ETXTBSY (golang.org/issue/22315). Try again briefly.
	for attempt := 0; ; attempt++ {
		out, err := exec.Command(bin, "version").CombinedOutput()
		if errors.Is(err, syscall.ETXTBSY) && attempt < 20 {
			time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
			continue
		}
		require.NoError(s.t, err, "%s", out)
		return strings.TrimSpace(string(out)), m.Annotations
	}
}

// A merge builds the module's Go program at that commit into an OCI image,
// pushes it, records it with its generation, and rolls it out; the image
// pulled back by digest runs the code of that commit.
func TestMergeBuildsRealImages(t *testing.T) {
	t.Parallel()
	s := newStack(t, imageMesh())
	h1 := s.commit("host")
	s.converge("host", h1)
	h2 := s.commit("host")
	st := s.converge("host", h2)

	b1, b2 := s.build("host", h1), s.build("host", h2)
	require.Greater(t, b2.Generation, b1.Generation, "generations order the commits")
	require.Equal(t, b2, *st.Build)
	out, ann := s.pullAndRun(b2)
	require.Equal(t, "host xxx", out, "the image runs the code of its commit")
	require.Equal(t, h2, ann[build.AnnotationRevision])
	out, _ = s.pullAndRun(b1)
	require.Equal(t, "host xx", out)

	rep := s.hosts["edge-1"].Report()
	r, _ := rep.Running("host")
	require.Equal(t, b2.Digest, r.Digest)
	require.Equal(t, b2.Image, r.Image, "the host is told where to pull from")
}

// A compile error ends the plan halted at the build tier, with the
// compiler's message in the plan's state, and nothing pushed.
func TestBrokenBuildHaltsWithCompilerMessage(t *testing.T) {
	t.Parallel()
	s := newStack(t, imageMesh())
	bad := s.commitSource("host", "package main\n\nfunc main() { undefinedThing() }\n")
	st := s.wait(s.start("host", bad).ID)
	require.Equal(t, meshapi.PlanHalted, st.State)
	require.Contains(t, st.Reason, "build failed")
	require.Contains(t, st.Reason, "undefined: undefinedThing")
	require.Equal(t, meshapi.TierSkipped, st.Tiers[0].State)
	require.Empty(t, s.hosts["edge-1"].Received())
}

// A registry that cannot be reached is retried, then the plan halts naming
// the address it tried.
func TestUnreachableRegistryHalts(t *testing.T) {
	t.Parallel()
	o := imageMesh()
	o.registry = "http://127.0.0.1:1"
	s := newStack(t, o)
	h1 := s.commit("host")
	st := s.wait(s.start("host", h1).ID)
	require.Equal(t, meshapi.PlanHalted, st.State)
	require.Contains(t, st.Reason, "127.0.0.1:1")
	require.Empty(t, s.hosts["edge-1"].Received())
}

// The whole way, with processes: a merge is built into an image, pulled by
// digest by the host agents' exec runtime and run; the next merge replaces
// the running process.
func TestMergeRunsRealProcesses(t *testing.T) {
	t.Parallel()
	o := imageMesh()
	o.exec = true
	s := newStack(t, o)
	h1 := s.commit("host")
	s.converge("host", h1)
	logOf := func(machine string) string {
		b, _ := os.ReadFile(filepath.Join(s.hosts[machine].dir, "logs", "host.log"))
		return string(b)
	}
	for _, m := range []string{"edge-1", "control-node"} {
		require.Contains(t, logOf(m), "host xx\n", "%s runs the build of %s", m, h1)
	}
	h2 := s.commit("host")
	s.converge("host", h2)
	for _, m := range []string{"edge-1", "control-node"} {
		log := logOf(m)
		require.Contains(t, log, "host xxx\n", "%s runs the new build", m)
		require.Contains(t, log, "stopping", "%s stopped the old process first", m)
	}
	s.runs("edge-1", s.build("host", h2))
}
