package testsuite

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/catalogue/pgtest"
	"github.com/meshroll/meshroll/internal/cli"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// loseCatalogue stops the worker, loses its catalogue (the SQLite file
// deleted, as a lost disk would; or a new, empty PostgreSQL database) and
// starts the worker again on the empty one.
func (s *stack) loseCatalogue(postgres bool) {
	s.t.Helper()
	s.worker.Stop()
	c, ok := s.cat.(io.Closer)
	require.True(s.t, ok, "the stack's catalogue is a SQL one (stackOptions.picture or postgres)")
	require.NoError(s.t, c.Close())
	if postgres {
		s.cat = openCatalogue(s.t, pgtest.Fresh(s.t))
	} else {
		db := strings.TrimPrefix(s.sqliteDSN(), "sqlite:")
		for _, f := range []string{db, db + "-wal", db + "-shm"} {
			require.NoError(s.t, os.RemoveAll(f))
		}
		s.cat = openCatalogue(s.t, s.sqliteDSN())
	}
	s.startWorker()
}

// rebuild runs starter catalogue rebuild and decodes its JSON answer.
func (s *stack) rebuild() (meshapi.RebuildResult, error) {
	s.t.Helper()
	out, err := s.starter("catalogue", "rebuild", "--by", "alice", "--reason", "catalogue disk lost", "--output", "json")
	var res meshapi.RebuildResult
	require.NoError(s.t, json.Unmarshal([]byte(out), &res), "output %q, error %v", out, err)
	return res, err
}

// TestCatalogueRebuild: with the catalogue lost, starter catalogue rebuild
// restores it from what the hosts run, rebuilding each reported commit and
// recording only builds whose digest matches (with their generations), and
// the next merge converges. A host that runs a digest its commit does not
// rebuild to, or a container with no commit, is named, not recorded, and
// the command exits 3.
func TestCatalogueRebuild(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		postgres bool
	}{{"sqlite", false}, {"postgres", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := exampleMesh()
			o.picture, o.postgres = !tc.postgres, tc.postgres
			testCatalogueRebuild(t, newStack(t, o), tc.postgres)
		})
	}
}

func testCatalogueRebuild(t *testing.T, s *stack, postgres bool) {
	h1, k1 := s.commit("host"), s.commit("mesh-controller")
	s.converge("host", h1)
	s.converge("mesh-controller", k1)
	hb, kb := s.build("host", h1), s.build("mesh-controller", k1)

	s.loseCatalogue(postgres)
	res, err := s.rebuild()
	require.NoError(t, err, "every host answered and every build verified")
	require.Empty(t, res.Unverified)
	require.Len(t, res.Verified, 2)
	for _, want := range []struct {
		b        mesh.Build
		machines []string
	}{{hb, []string{"control-node", "edge-1"}}, {kb, []string{"control-node"}}} {
		got, found, err := s.cat.Lookup(context.Background(), want.b.Digest)
		require.NoError(t, err)
		require.True(t, found, "%s at %s recorded again", want.b.Module, want.b.Commit)
		require.Equal(t, want.b.Generation, got.Generation)
		require.Equal(t, want.b.Commit, got.Commit)
		for _, m := range want.machines {
			conv, ok, err := s.cat.NewestConvergedOn(context.Background(), want.b.Module, m)
			require.NoError(t, err)
			require.True(t, ok, "%s converged on %s again", want.b.Module, m)
			require.Equal(t, want.b.Digest, conv.Digest)
		}
	}
	// Merges proceed: every machine's running digest is known again.
	h2 := s.commit("host")
	s.converge("host", h2)

	// Someone runs, on edge-1, a build of k1 no one made, and a container
	// with no commit.
	e1 := s.hosts["edge-1"]
	running, ok := e1.Report().Running("host")
	require.True(t, ok)
	forged, bare := "sha256:"+strings.Repeat("f", 64), "sha256:"+strings.Repeat("b", 64)
	_, err = e1.a.Apply(context.Background(), mesh.Declaration{Machine: "edge-1", Seq: e1.Report().LastSeq + 1, Plan: "by-hand", Request: "by-hand@edge-1",
		Containers: []mesh.Container{
			{Module: "host", Digest: running.Digest, Generation: running.Generation, Commit: running.Commit},
			{Module: "mesh-controller", Digest: forged, Generation: kb.Generation, Commit: k1},
			{Module: "sidecar", Digest: bare, Generation: 1},
		}})
	require.NoError(t, err)
	eventually(t, 30*time.Second, "edge-1 to run what was declared by hand", func() bool {
		_, a := e1.Report().Running("mesh-controller")
		_, b := e1.Report().Running("sidecar")
		return a && b
	})

	res, err = s.rebuild()
	require.Error(t, err)
	require.Equal(t, cli.ExitPlanFailed, cli.ExitCode(err), "some builds did not verify: %v", err)
	require.Len(t, res.Verified, 2, "host at h2 everywhere, mesh-controller at k1 on control-node: %+v", res.Verified)
	reasons := map[string]string{}
	for _, v := range res.Unverified {
		require.Equal(t, []string{"edge-1"}, v.Claim.Machines)
		reasons[v.Claim.Digest] = v.Reason
	}
	require.Len(t, reasons, 2, "%+v", res.Unverified)
	require.Contains(t, reasons[forged], "rebuilds to "+kb.Digest)
	require.Contains(t, reasons[forged], "not trusted")
	require.Contains(t, reasons[bare], "reports no commit")
	for _, d := range []string{forged, bare} {
		_, found, err := s.cat.Lookup(context.Background(), d)
		require.NoError(t, err)
		require.False(t, found, "%s is never recorded", d)
	}

	// The table says so for a person.
	out, err := s.starter("catalogue", "rebuild", "--by", "alice")
	require.Error(t, err)
	t.Logf("starter catalogue rebuild:\n%s", out)
	require.Regexp(t, `(?m)^NO\s+mesh-controller\s+`+mesh.ShortCommit(k1)+`\s+-\s+`+regexp.QuoteMeta(mesh.ShortDigest(forged))+`\s+edge-1$`, out)
	require.Contains(t, out, "2 builds verified and recorded; 2 not")
}

// TestCaptureRebuildHistory records a catalogue rebuild that verifies a
// build on two machines. Like the other captures it runs only with
// MESHROLL_WRITE_HISTORIES=1.
func TestCaptureRebuildHistory(t *testing.T) {
	t.Parallel()
	capturing(t)
	o := exampleMesh()
	o.picture = true
	s := captureStack(t, o)
	s.converge("host", s.commit("host"))
	s.loseCatalogue(false)
	_, err := s.rebuild()
	require.NoError(t, err)

	s.writeHistories(capturedRun{"lever-catalogue-rebuild", meshapi.RebuildID(), ""})
}
