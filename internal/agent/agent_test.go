package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/host/hosttest"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/registry"
)

func TestApplyAndReport(t *testing.T) {
	h := newHarness(t, t.TempDir(), held)
	web := ctr("web", 5)
	web.Commit, web.Image = strings.Repeat("ab", 20), "127.0.0.1:5000/meshroll/web"
	web.Args, web.Env = []string{"--port", "80"}, map[string]string{"MODE": "prod"}
	api := ctr("api", 2)
	d := decl(1, web, api)

	res := h.mustApply(d)
	assert.Equal(t, host.ApplyResult{Seq: 1}, res)

	rep := h.report()
	assert.Equal(t, testMachine, rep.Machine)
	assert.Equal(t, uint64(1), rep.LastSeq)
	assert.Equal(t, d.Request, rep.LastRequest)
	require.Len(t, rep.Containers, 2)
	assert.Equal(t, "api", rep.Containers[0].Module, "containers are sorted by module")
	got, ok := rep.Running("web")
	require.True(t, ok)
	assert.Equal(t, mesh.StateStarting, got.State, "answered once recorded, before running")
	assert.Equal(t, web, got.Declared(), "the report keeps the container exactly as declared")
	assert.Equal(t, d.Plan, got.Plan)
	assert.Equal(t, uint64(1), got.Seq)
	assert.NotEmpty(t, got.Since)

	h.run("web")
	h.run("api")
	for _, rc := range h.report().Containers {
		assert.Equal(t, mesh.StateRunning, rc.State, rc.Module)
	}

	// Re-declaring web unchanged keeps it running (same since); api changes.
	before, _ := h.report().Running("web")
	h.mustApply(decl(2, web, ctr("api", 3)))
	rep = h.report()
	w, _ := rep.Running("web")
	a, _ := rep.Running("api")
	assert.Equal(t, mesh.StateRunning, w.State)
	assert.Equal(t, before.Since, w.Since)
	assert.Equal(t, uint64(2), w.Seq, "seq and plan say which declaration last named it, as hosttest reports")
	assert.Equal(t, &mesh.Introduction{Plan: d.Plan, Seq: 1}, w.Introduced, "kept, so still the first declaration's")
	assert.Equal(t, &mesh.Introduction{Plan: decl(2).Plan, Seq: 2}, a.Introduced)
	assert.Equal(t, mesh.StateStarting, a.State)

	// A module left out is stopped.
	h.mustApply(decl(3, web))
	rep = h.report()
	require.Len(t, rep.Containers, 1)
	assert.Equal(t, "web", rep.Containers[0].Module)

	e := h.journal()
	assert.Equal(t, []string{"applied 3", "applied 2", "running 1", "running 1", "applied 1"}, outcomes(e))
	assert.Equal(t, RuntimeNoop, e[0].Runtime)
	assert.Equal(t, d.Containers, e[4].Containers, "the journal keeps every container as told")
	require.NotNil(t, e[4].Merge)
	assert.Equal(t, Merge{Module: "web", Commit: strings.Repeat("0", 39) + "1"}, *e[4].Merge)
}

func TestRefusals(t *testing.T) {
	tagged := ctr("web", 9)
	tagged.Image = "127.0.0.1:5000/meshroll/web:latest"
	cases := []struct {
		name    string
		d       mesh.Declaration
		status  int
		code    string
		message string
	}{
		{"stale sequence", decl(1, ctr("web", 9)), http.StatusConflict, host.CodeSequence, "last applied 2"},
		{"same sequence other content", decl(2, ctr("web", 9)), http.StatusConflict, host.CodeSequence, "last applied 2"},
		{"unpinned digest", decl(3, mesh.Container{Module: "web", Digest: "latest", Generation: 9}), http.StatusBadRequest, host.CodeUnpinned, "digest"},
		{"tagged image", decl(3, tagged), http.StatusBadRequest, host.CodeUnpinned, "repository only"},
		{"downgrade", decl(3, ctr("web", 4)), http.StatusConflict, host.CodeDowngrade, "below"},
		{"other machine", func() mesh.Declaration { d := decl(3, ctr("web", 9)); d.Machine = "edge-2"; return d }(), http.StatusBadRequest, host.CodeInvalid, "edge-2"},
		{"module twice", decl(3, ctr("web", 9), ctr("web", 8)), http.StatusBadRequest, host.CodeInvalid, "twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, t.TempDir())
			h.mustApply(decl(1, ctr("web", 5)))
			h.waitState("web", mesh.StateRunning)
			h.mustApply(decl(2, ctr("web", 6)))
			h.waitState("web", mesh.StateRunning)

			_, err := h.apply(tc.d)
			r, ok := host.IsRefused(err)
			require.True(t, ok, "want a refusal, got %v", err)
			assert.Equal(t, tc.status, r.Status)
			assert.Equal(t, tc.code, r.Code)
			assert.Equal(t, uint64(2), r.LastSeq, "a refusal names the last applied sequence")
			assert.Contains(t, r.Error(), tc.message)

			assert.Equal(t, uint64(2), h.report().LastSeq, "a refusal changes nothing")
			e := h.journal()[0]
			assert.Equal(t, OutcomeRefused, e.Outcome)
			assert.Equal(t, tc.code, e.Code)
			assert.Equal(t, r.Message, e.Message, "the journal keeps the refusal as the caller got it")
			assert.Equal(t, tc.d.Seq, e.Seq)
			assert.Equal(t, tc.d.Machine, e.Machine)
			assert.Equal(t, uint64(2), e.LastSeq)
		})
	}
}

func TestExactRepeat(t *testing.T) {
	h := newHarness(t, t.TempDir())
	d := decl(1, ctr("web", 5), ctr("api", 1))
	h.mustApply(d)
	h.waitState("web", mesh.StateRunning)
	h.waitState("api", mesh.StateRunning)

	// Same content, containers in another order: still the same declaration.
	again := decl(1, ctr("api", 1), ctr("web", 5))
	res := h.mustApply(again)
	assert.Equal(t, host.ApplyResult{Seq: 1, Repeat: true}, res)
	rep := h.report()
	assert.Equal(t, uint64(1), rep.LastSeq)
	for _, rc := range rep.Containers {
		assert.Equal(t, mesh.StateRunning, rc.State, "a repeat restarts nothing")
	}

	var applied, repeats int
	for _, e := range h.journal() {
		switch e.Outcome {
		case OutcomeApplied:
			applied++
		case OutcomeRepeat:
			repeats++
			assert.Equal(t, uint64(1), e.Seq)
		}
	}
	assert.Equal(t, 1, applied, "journalled as applied once")
	assert.Equal(t, 1, repeats)
}

func TestFloor(t *testing.T) {
	h := newHarness(t, t.TempDir(), held)
	h.mustApply(decl(1, ctr("web", 5)))
	_, ok := h.floor("web")
	assert.False(t, ok, "no floor before anything ran")
	h.run("web")
	f, _ := h.floor("web")
	assert.Equal(t, int64(5), f.Generation)

	// Generation 7 is declared but not yet running: the floor stays at 5,
	// so rolling back to 5 needs no force.
	h.mustApply(decl(2, ctr("web", 7)))
	f, _ = h.floor("web")
	assert.Equal(t, int64(5), f.Generation, "the floor rises only once the new container runs")
	_, err := h.apply(decl(3, ctr("web", 4)))
	requireRefused(t, err, host.CodeDowngrade)
	h.mustApply(decl(3, ctr("web", 5)))
	f, _ = h.floor("web")
	assert.Equal(t, int64(5), f.Generation)

	h.mustApply(decl(4, ctr("web", 7)))
	h.run("web")
	f, _ = h.floor("web")
	assert.Equal(t, int64(7), f.Generation)
	assert.Equal(t, ctr("web", 7).Digest, f.Digest)

	// Below the floor: refused without force, applied and journalled with.
	_, err = h.apply(decl(5, ctr("web", 6)))
	requireRefused(t, err, host.CodeDowngrade)
	forced := decl(5, ctr("web", 6))
	forced.Force = true
	h.mustApply(forced)
	e := h.journal()[0]
	assert.Equal(t, OutcomeApplied, e.Outcome)
	assert.True(t, e.Force, "force is journalled")
	assert.Equal(t, fmt.Sprintf("module web: generation 6 (%s) is below generation 7 (%s), which has run here",
		mesh.ShortDigest(ctr("web", 6).Digest), mesh.ShortDigest(ctr("web", 7).Digest)), e.ForcedPast,
		"with the floor it overrode, in words, and none of the refusal's advice to force")
	f, _ = h.floor("web")
	assert.Equal(t, int64(7), f.Generation, "still 7 until the forced container runs")
	h.run("web")
	f, _ = h.floor("web")
	assert.Equal(t, int64(6), f.Generation, "a forced container that runs lowers the floor")

	// Force with nothing to override records no override.
	up := decl(6, ctr("web", 8))
	up.Force = true
	h.mustApply(up)
	e = h.journal()[0]
	assert.True(t, e.Force)
	assert.Empty(t, e.ForcedPast)
	h.run("web")

	// A rollback plan is the one sanctioned downgrade: below the floor
	// without force, journalled as a rollback with who and why, and the
	// floor follows once it runs.
	back := decl(7, ctr("web", 6))
	back.Rollback, back.Reason = true, "rollback by alice: crashes under load"
	h.mustApply(back)
	e = h.journal()[0]
	assert.True(t, e.Rollback, "the rollback is journalled")
	assert.False(t, e.Force)
	assert.Equal(t, "rollback by alice: crashes under load", e.Reason)
	assert.Contains(t, e.ForcedPast, "below", "with the floor it went below")
	h.run("web")
	f, _ = h.floor("web")
	assert.Equal(t, int64(6), f.Generation, "the floor follows the rollback")
}

func TestRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir, held)
	web := ctr("web", 5)
	web.Env = map[string]string{"A": "1"}
	h.mustApply(decl(1, web))
	h.run("web")
	last := decl(2, web, ctr("api", 3))
	h.mustApply(last)
	h.run("api")
	_, err := h.apply(decl(1, ctr("web", 1)))
	require.Error(t, err)
	rep1, journal1 := h.report(), h.journal()
	floor1 := map[string]host.Mark{}
	for _, m := range []string{"web", "api"} {
		floor1[m], _ = h.floor(m)
	}

	h.restart()
	rep2 := h.report()
	assert.Equal(t, rep1.LastSeq, rep2.LastSeq)
	assert.Equal(t, rep1.LastRequest, rep2.LastRequest)
	require.Len(t, rep2.Containers, len(rep1.Containers))
	for i, rc := range rep2.Containers {
		assert.Equal(t, rep1.Containers[i].Declared(), rc.Declared())
		assert.Equal(t, rep1.Containers[i].Seq, rc.Seq)
		assert.Equal(t, rep1.Containers[i].Plan, rc.Plan)
		assert.Equal(t, rep1.Containers[i].Introduced, rc.Introduced, rc.Module)
		assert.Equal(t, mesh.StateStarting, rc.State, "handed to the runtime again (reconcile)")
	}
	w, _ := rep2.Running("web")
	assert.Equal(t, &mesh.Introduction{Plan: decl(1).Plan, Seq: 1}, w.Introduced)
	for m, want := range floor1 {
		got, _ := h.floor(m)
		assert.Equal(t, want, got, m)
	}
	assert.Equal(t, journal1, h.journal())

	h.run("api")
	h.run("web")
	for _, rc := range h.report().Containers {
		assert.Equal(t, mesh.StateRunning, rc.State)
	}
	// The restarted agent still knows its last declaration exactly, and its
	// floor.
	res := h.mustApply(last)
	assert.True(t, res.Repeat)
	_, err = h.apply(decl(3, ctr("web", 4)))
	requireRefused(t, err, host.CodeDowngrade)
}

// TestCrash stops the agent as a kill would at each point of an apply, then
// restarts it on the same directory: the report is the truth, and the
// journal claims exactly the applies the report shows.
func TestCrash(t *testing.T) {
	cases := []struct {
		point string
		// landed is whether the declaration stands after the restart.
		landed bool
	}{
		{crashJournalWrite, false},
		{crashAfterJournal, true},
		{crashAfterCheckpoint, true},
	}
	for _, tc := range cases {
		t.Run(tc.point, func(t *testing.T) {
			dir := t.TempDir()
			h := newHarness(t, dir)
			h.mustApply(decl(1, ctr("web", 5)))
			h.waitState("web", mesh.StateRunning)
			journalBefore := h.journal()

			d := decl(2, ctr("web", 6))
			h.crashAt(tc.point)
			_, err := h.apply(d)
			require.True(t, host.IsUnreachable(err), "a crashed agent gives no answer: %v", err)
			_, err = h.c.Report(context.Background())
			require.Error(t, err, "nor any other")

			h.restart()
			h.waitState("web", mesh.StateRunning)
			rep := h.report()
			want := uint64(1)
			if tc.landed {
				want = 2
			}
			assert.Equal(t, want, rep.LastSeq)
			w, _ := rep.Running("web")
			if tc.landed {
				assert.Equal(t, d.Containers[0].Digest, w.Digest)
				assert.Equal(t, d.Request, rep.LastRequest)
			} else {
				assert.Equal(t, ctr("web", 5).Digest, w.Digest)
			}

			es := h.journal()
			var appliedSeqs []uint64
			for _, e := range es {
				if e.Outcome == OutcomeApplied {
					appliedSeqs = append(appliedSeqs, e.Seq)
				}
			}
			assert.Equal(t, rep.LastSeq, appliedSeqs[0], "the newest applied entry is what the report shows")
			if !tc.landed {
				// The restarted agent journals its containers running again;
				// before that, the journal is exactly what it was.
				assert.Equal(t, journalBefore, es[len(es)-len(journalBefore):], "nothing claims the lost apply")
				assert.Equal(t, []string{"running 1"}, outcomes(es[:len(es)-len(journalBefore)]))
				b, err := os.ReadFile(filepath.Join(dir, JournalFile))
				require.NoError(t, err)
				assert.True(t, bytes.HasSuffix(b, []byte("}\n")), "the torn line is gone")
				assert.Contains(t, h.log.String(), "torn journal line")
			} else {
				assert.Len(t, appliedSeqs, 2, "applied once each")
			}
			if tc.point == crashAfterJournal {
				assert.Contains(t, h.log.String(), "rolled the checkpoint forward")
			}

			// The sender retries, as after any lost answer.
			res := h.mustApply(d)
			assert.Equal(t, tc.landed, res.Repeat)
			h.waitState("web", mesh.StateRunning)
			assert.Equal(t, uint64(2), h.report().LastSeq)

			// And everything survives one more ordinary restart.
			h.restart()
			assert.Equal(t, uint64(2), h.report().LastSeq)
			h.waitState("web", mesh.StateRunning)
			cp, ok, err := readCheckpoint(dir)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, uint64(len(h.journal())), cp.JournalIndex)
		})
	}
}

// TestCheckpointFailure: a checkpoint that cannot be written fails the
// answer but not the apply, whose journal entry is committed.
func TestCheckpointFailure(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir, held)
	h.mustApply(decl(1, ctr("web", 5)))
	// A directory where the temporary checkpoint goes makes writing it fail.
	blocker := filepath.Join(dir, LedgerFile+".tmp")
	require.NoError(t, os.MkdirAll(filepath.Join(blocker, "x"), 0o700))

	_, err := h.apply(decl(2, ctr("web", 6)))
	require.True(t, host.IsUnreachable(err), "%v", err)
	assert.Contains(t, err.Error(), "journalled and stands")
	rep := h.report()
	assert.Equal(t, uint64(2), rep.LastSeq, "the report shows the committed apply")
	cp, _, err := readCheckpoint(dir)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), cp.Ledger.LastSeq, "the checkpoint lags")

	res := h.mustApply(decl(2, ctr("web", 6)))
	assert.True(t, res.Repeat, "a retry finds it applied")

	// Close retries the checkpoint once it can be written.
	require.NoError(t, os.RemoveAll(blocker))
	h.close()
	cp, _, err = readCheckpoint(dir)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), cp.Ledger.LastSeq)
	h.open()
	assert.Equal(t, uint64(2), h.report().LastSeq)
}

func TestJournalPaging(t *testing.T) {
	h := newHarness(t, t.TempDir(), withToken(testToken))
	for seq := uint64(1); seq <= 4; seq++ {
		h.mustApply(decl(seq, ctr("web", int64(seq))))
		h.waitState("web", mesh.StateRunning)
		_, err := h.apply(decl(seq-1, ctr("web", 1)))
		require.Error(t, err)
	}
	all := h.journal()
	require.Len(t, all, 12)
	for i, e := range all {
		assert.Equal(t, uint64(len(all)-i), e.Index, "newest first")
	}

	var paged []Entry
	query := "?limit=5"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		status, p, body := h.getJournal(query, testToken)
		require.Equal(t, http.StatusOK, status, body)
		assert.Equal(t, testMachine, p.Machine)
		assert.Equal(t, RuntimeNoop, p.Runtime)
		assert.LessOrEqual(t, len(p.Entries), 5)
		paged = append(paged, p.Entries...)
		if p.NextBefore == 0 {
			break
		}
		assert.Equal(t, p.Entries[len(p.Entries)-1].Index, p.NextBefore)
		query = "?limit=5&before=" + strconv.FormatUint(p.NextBefore, 10)
	}
	assert.Equal(t, mustJSON(t, all), mustJSON(t, paged), "the pages together are the whole journal")

	status, p, _ := h.getJournal("", testToken)
	require.Equal(t, http.StatusOK, status)
	assert.Len(t, p.Entries, 12, "default limit covers it")
	assert.Zero(t, p.NextBefore)

	status, p, _ = h.getJournal("?before=1", testToken)
	require.Equal(t, http.StatusOK, status)
	assert.Empty(t, p.Entries)
	assert.Equal(t, "[]", string(mustJSON(t, p.Entries)), "an empty page is [], not null")

	for _, q := range []string{"?limit=0", "?limit=501", "?limit=x", "?before=-1", "?since=3", "?limit=1&limit=2"} {
		status, _, body := h.getJournal(q, testToken)
		assert.Equal(t, http.StatusBadRequest, status, q)
		assert.Contains(t, body, `"code":"invalid"`, q)
	}
	status, _, _ = h.getJournal("?limit=500", testToken)
	assert.Equal(t, http.StatusOK, status)

	req, err := http.NewRequest(http.MethodPost, h.srv.URL+PathJournal, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestAuth(t *testing.T) {
	h := newHarness(t, t.TempDir(), withToken(testToken))
	body := func() *bytes.Reader { return bytes.NewReader(mustJSON(t, decl(1, ctr("web", 1)))) }
	cases := []struct {
		method, path string
		open         bool
	}{
		{http.MethodGet, host.PathHealthz, true},
		{http.MethodGet, host.PathReport, false},
		{http.MethodPost, host.PathDeclarations, false},
		{http.MethodGet, PathJournal, false},
	}
	for _, tc := range cases {
		for _, tok := range []string{"", "wrong", testToken} {
			name := tc.method + " " + tc.path + " token=" + tok
			var rd *bytes.Reader
			if tc.method == http.MethodPost {
				rd = body()
			} else {
				rd = bytes.NewReader(nil)
			}
			req, err := http.NewRequest(tc.method, h.srv.URL+tc.path, rd)
			require.NoError(t, err)
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, RuntimeNoop, resp.Header.Get(HeaderRuntime), name)
			if tc.open || tok == testToken {
				assert.Equal(t, http.StatusOK, resp.StatusCode, name)
			} else {
				assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, name)
				assert.NotEmpty(t, resp.Header.Get("WWW-Authenticate"), name)
			}
		}
	}
	// Nothing unauthenticated reached the journal.
	h.waitState("web", mesh.StateRunning)
	assert.Equal(t, []string{"running 1", "applied 1"}, outcomes(h.journal()))
}

func TestBadBodies(t *testing.T) {
	h := newHarness(t, t.TempDir())
	good := mustJSON(t, decl(1, ctr("web", 1)))
	cases := []struct {
		name   string
		body   []byte
		status int
	}{
		{"unknown field", []byte(`{"machine":"edge-1","seq":1,"plan":"p","request":"r","containers":[],"colour":"red"}`), http.StatusBadRequest},
		{"not json", []byte(`seq=1`), http.StatusBadRequest},
		{"trailing data", append(append([]byte{}, good...), []byte(` {}`)...), http.StatusBadRequest},
		{"too big", append([]byte(`{"machine":"`), bytes.Repeat([]byte("a"), host.MaxBodyBytes+1)...), http.StatusRequestEntityTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(h.srv.URL+host.PathDeclarations, "application/json", bytes.NewReader(tc.body))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tc.status, resp.StatusCode)
		})
	}
	assert.Empty(t, h.journal(), "undecodable requests never reach the agent")
	assert.Zero(t, h.report().LastSeq)
}

func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		// state leaves dir as the agent is to find it.
		state   func(t *testing.T, dir string)
		machine string
		want    string
	}{
		{"another machine's state", func(t *testing.T, dir string) {
			h := newHarness(t, dir)
			h.mustApply(decl(1, ctr("web", 1)))
			h.close()
		}, "edge-2", `belongs to machine "edge-1"`},
		{"directory in use", func(t *testing.T, dir string) { newHarness(t, dir) }, testMachine, "in use by another agent"},
		{"corrupt journal", func(t *testing.T, dir string) {
			h := newHarness(t, dir)
			h.mustApply(decl(1, ctr("web", 1)))
			h.waitState("web", mesh.StateRunning)
			h.mustApply(decl(2, ctr("web", 2)))
			h.close()
			path := filepath.Join(dir, JournalFile)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			b[5] = '#'
			require.NoError(t, os.WriteFile(path, b, 0o600))
		}, testMachine, "corrupt at line 1"},
		{"journal shorter than checkpoint", func(t *testing.T, dir string) {
			h := newHarness(t, dir)
			h.mustApply(decl(1, ctr("web", 1)))
			h.close()
			require.NoError(t, os.WriteFile(filepath.Join(dir, JournalFile), nil, 0o600))
		}, testMachine, "journal was cut or replaced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.state(t, dir)
			_, err := Open(context.Background(), Options{Machine: tc.machine, StateDir: dir, Runtime: NewNoopRuntime(0)})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestNewRuntime(t *testing.T) {
	rt, err := NewRuntime(RuntimeNoop, RuntimeOptions{})
	require.NoError(t, err)
	assert.Equal(t, RuntimeNoop, rt.Name())
	_, err = NewRuntime(RuntimeExec, RuntimeOptions{StateDir: t.TempDir()})
	assert.ErrorContains(t, err, "no machine named")
	_, err = NewRuntime(RuntimeExec, RuntimeOptions{Machine: "m"})
	assert.ErrorContains(t, err, "no state directory")
	_, err = NewRuntime(RuntimeExec, RuntimeOptions{Machine: "m", StateDir: t.TempDir(), Registry: registry.Options{Address: "127.0.0.1:5000", CAFile: filepath.Join(t.TempDir(), "none.pem")}})
	assert.ErrorContains(t, err, "registry CA file")
	rt, err = NewRuntime(RuntimeExec, RuntimeOptions{Machine: "m", StateDir: t.TempDir(), Registry: registry.Options{Address: "127.0.0.1:5000"}})
	require.NoError(t, err)
	assert.Equal(t, RuntimeExec, rt.Name())
	require.NoError(t, rt.Close(context.Background()))
	_, err = NewRuntime("podman", RuntimeOptions{})
	assert.ErrorIs(t, err, ErrUnknownRuntime)
	_, err = NewRuntime(RuntimeNoop, RuntimeOptions{StartDelay: -1})
	assert.Error(t, err)
}

// TestSameAsHosttest runs one sequence of declarations against the agent
// and against hosttest's in-memory host: the answers must match, since the
// machine workflow is tested against the one and meets the other.
func TestSameAsHosttest(t *testing.T) {
	h := newHarness(t, t.TempDir())
	fake := hosttest.New(t, testMachine)
	fc := fake.Client()

	forced := decl(3, ctr("web", 3))
	forced.Force = true
	other := decl(3, ctr("web", 9))
	other.Machine = "edge-9"
	steps := []mesh.Declaration{
		decl(1, ctr("web", 5)),
		decl(1, ctr("web", 5)),
		decl(1, ctr("web", 6)),
		decl(2, ctr("web", 3)),
		forced,
		decl(4, mesh.Container{Module: "web", Digest: "sha256:short", Generation: 9}),
		other,
		decl(3, ctr("web", 3), ctr("api", 1)),
		decl(4, ctr("web", 3), ctr("api", 1)),
		decl(4, ctr("api", 1), ctr("web", 3)),
	}
	type answer struct {
		Res     host.ApplyResult
		Status  int
		Code    string
		LastSeq uint64
	}
	ask := func(c host.Client, d mesh.Declaration) answer {
		res, err := c.Apply(context.Background(), d)
		var a answer
		a.Res = res
		if err != nil {
			r, ok := host.IsRefused(err)
			require.True(t, ok, "%v", err)
			a.Status, a.Code, a.LastSeq = r.Status, r.Code, r.LastSeq
		}
		return a
	}
	for i, d := range steps {
		want := ask(fc, d)
		got := ask(h.c, d)
		assert.Equal(t, want, got, "step %d: seq %d", i, d.Seq)
		if got.Code == "" && !got.Res.Repeat {
			for _, c := range d.Containers {
				h.waitState(c.Module, mesh.StateRunning)
			}
		}
		wr, gr := fake.Report(), h.report()
		assert.Equal(t, wr.LastSeq, gr.LastSeq, "step %d", i)
		assert.Equal(t, wr.LastRequest, gr.LastRequest, "step %d", i)
		require.Len(t, gr.Containers, len(wr.Containers), "step %d", i)
		for j := range wr.Containers {
			w, g := wr.Containers[j], gr.Containers[j]
			w.Since, g.Since = "", ""
			w.HealthySince, g.HealthySince = "", ""
			if w.Health == "" {
				// A test host that does not judge health yet reports none,
				// which reads as unknown; the agent judges it.
				g.Health = ""
			}
			assert.Equal(t, w, g, "step %d", i)
		}
	}
}

func TestRuntimeFailure(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(context.Background(), Options{Machine: testMachine, StateDir: dir, Runtime: failingRuntime{}})
	require.NoError(t, err)
	defer a.Close(context.Background())
	res, err := a.Apply(context.Background(), decl(1, ctr("web", 1)))
	require.NoError(t, err, "the declaration is recorded whatever the runtime does")
	assert.Equal(t, uint64(1), res.Seq)
	rep, err := a.Report(context.Background())
	require.NoError(t, err)
	assert.Equal(t, mesh.StateExited, rep.Containers[0].State)
	assert.Contains(t, rep.Containers[0].Reason, "no engine", "the report says why, for the push to say it")
	es, err := a.Journal(context.Background(), 0, 0)
	require.NoError(t, err)
	assert.Equal(t, OutcomeRuntimeFailed, es[0].Outcome)
	assert.Contains(t, es[0].Message, "no engine")
	_, ok := a.ledger.Floor["web"]
	assert.False(t, ok)
}

type failingRuntime struct{}

func (failingRuntime) Name() string { return "failing" }
func (failingRuntime) Apply(_ context.Context, cs []mesh.Container, _ func(Update)) error {
	if len(cs) == 0 {
		return nil
	}
	return errors.New("no engine")
}
func (failingRuntime) Close(context.Context) error { return nil }

func TestMergeOf(t *testing.T) {
	commit := strings.Repeat("c", 40)
	assert.Equal(t, &Merge{Module: "web", Commit: commit}, mergeOf("plan/web/"+commit))
	for _, p := range []string{"", "p", "plan/web/abc", "other/web/" + commit, "plan/Web/" + commit} {
		assert.Nil(t, mergeOf(p), p)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// TestConcurrentApplies: overlapping declarations are judged one at a time,
// each answer is journalled exactly once, and applies are journalled in
// increasing sequence.
func TestConcurrentApplies(t *testing.T) {
	h := newHarness(t, t.TempDir())
	const n = 24
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := 0
	for i := range n {
		wg.Add(1)
		go func(seq uint64) {
			defer wg.Done()
			_, err := h.c.Apply(context.Background(), decl(seq, ctr("web", 5)))
			if _, refused := host.IsRefused(err); err == nil || refused {
				mu.Lock()
				answers++
				mu.Unlock()
			}
		}(uint64(i%12 + 1))
	}
	wg.Wait()
	require.Equal(t, n, answers)
	var judged int
	var last uint64
	es := h.journal()
	for i := len(es) - 1; i >= 0; i-- {
		switch e := es[i]; e.Outcome {
		case OutcomeApplied:
			judged++
			assert.Greater(t, e.Seq, last)
			last = e.Seq
		case OutcomeRefused, OutcomeRepeat:
			judged++
		}
	}
	assert.Equal(t, n, judged)
	assert.Equal(t, last, h.report().LastSeq)
}

// checkingRuntime is a noop runtime that cannot run a container on a
// bridge, as the exec runtime cannot.
type checkingRuntime struct{ *NoopRuntime }

func (checkingRuntime) Check(cs []mesh.Container) error {
	for _, c := range cs {
		if c.Network == mesh.NetworkBridge {
			return fmt.Errorf("module %s: network %s: not here", c.Module, c.Network)
		}
	}
	return nil
}

// A declaration the runtime says it cannot run is refused as invalid,
// naming the runtime and the setting, and journalled as refused: nothing
// of it is applied, and the next good declaration applies.
func TestApplyRefusesWhatTheRuntimeCannotRun(t *testing.T) {
	a, err := Open(context.Background(), Options{
		Machine: testMachine, StateDir: t.TempDir(), Runtime: checkingRuntime{NewNoopRuntime(0)}, Log: zerolog.Nop(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(context.Background()) })

	web := ctr("web", 1)
	web.Network = mesh.NetworkBridge
	_, err = a.Apply(context.Background(), decl(1, web))
	var r *host.Refusal
	require.ErrorAs(t, err, &r)
	assert.Equal(t, host.CodeInvalid, r.Code)
	assert.Contains(t, r.Message, "runtime noop: module web: network bridge")
	rep, err := a.Report(context.Background())
	require.NoError(t, err)
	assert.Zero(t, rep.LastSeq, "nothing applied")
	j := journalOf(t, a)
	require.Len(t, j, 1)
	assert.Equal(t, OutcomeRefused, j[0].Outcome)

	web.Network = mesh.NetworkHost
	_, err = a.Apply(context.Background(), decl(2, web))
	require.NoError(t, err)
	rep, err = a.Report(context.Background())
	require.NoError(t, err)
	got, ok := rep.Running("web")
	require.True(t, ok)
	assert.Equal(t, mesh.NetworkHost, got.Network, "the report keeps the network as declared")
}
