package fleetui

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// fake is a Source of the test's making: every answer is a field, and it
// counts the fleet reads it served.
type fake struct {
	mu          sync.Mutex
	status      machines.Status
	statusErr   error
	freezes     []mesh.Freeze
	freezesErr  error
	rejected    map[string]mesh.Rejection
	plans       []Plan
	plansErr    error
	recent      []plans.Summary
	details     map[string]machines.Detail
	detailErr   error
	journal     map[string][]machines.JournalEntry // newest first, indexes down to 1
	journalErr  error
	statusReads int
	// logs are the modules' output by "machine/module"; logsErr fails
	// every logs read, and logsHang holds each until its context ends.
	logs     map[string]string
	logsErr  error
	logsHang bool
	// block, when set, holds every Status read until it is closed.
	block chan struct{}
}

func (f *fake) Status(context.Context) (machines.Status, error) {
	f.mu.Lock()
	f.statusReads++
	block := f.block
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status, f.statusErr
}

func (f *fake) reads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.statusReads
}

func (f *fake) Freezes(context.Context) ([]mesh.Freeze, error) { return f.freezes, f.freezesErr }

func (f *fake) Rejected(_ context.Context, digests []string) (map[string]mesh.Rejection, error) {
	out := map[string]mesh.Rejection{}
	for _, d := range digests {
		if r, ok := f.rejected[d]; ok {
			out[d] = r
		}
	}
	return out, nil
}

func (f *fake) Plans(context.Context) ([]Plan, error) { return f.plans, f.plansErr }

func (f *fake) Recent(context.Context, int) ([]plans.Summary, error) { return f.recent, nil }

func (f *fake) Machine(_ context.Context, name string) (machines.Detail, error) {
	d, ok := f.details[name]
	if !ok {
		d = machines.Detail{Machine: name, Containers: []machines.Container{}}
	}
	return d, f.detailErr
}

func (f *fake) Journal(_ context.Context, name string, before uint64, n int) (machines.JournalPage, error) {
	if f.journalErr != nil {
		return machines.JournalPage{Entries: []machines.JournalEntry{}}, f.journalErr
	}
	p := machines.JournalPage{Entries: []machines.JournalEntry{}}
	for _, e := range f.journal[name] {
		if before != 0 && e.Index >= before {
			continue
		}
		if len(p.Entries) == n {
			break
		}
		p.Entries = append(p.Entries, e)
	}
	if k := len(p.Entries); k > 0 && p.Entries[k-1].Index > 1 {
		p.NextBefore = p.Entries[k-1].Index
	}
	return p, nil
}

func (f *fake) Logs(ctx context.Context, name, module string, _ int) (string, error) {
	if f.logsHang {
		<-ctx.Done()
		return "", ctx.Err()
	}
	if f.logsErr != nil {
		return "", f.logsErr
	}
	text, ok := f.logs[name+"/"+module]
	if !ok {
		return "", &host.RefusedError{Status: http.StatusNotFound, Code: host.CodeNotFound, Message: "module " + module + " is not declared on machine " + name}
	}
	return text, nil
}

// cfg is a mesh config of machines "name:tier:module,module".
func cfg(specs ...string) *config.Config {
	c := config.Default()
	for _, s := range specs {
		parts := strings.Split(s, ":")
		m := config.Machine{Host: "http://127.0.0.1:1"}
		m.Tier = int(parts[1][0] - '0')
		m.Modules = strings.Split(parts[2], ",")
		for _, mod := range m.Modules {
			c.Modules[mod] = config.Module{Repo: ".", Path: "examples/" + mod}
		}
		c.Machines[parts[0]] = m
	}
	return c
}

// row is a status row of module on machine running generation gen,
// healthy; change it with the options.
func row(machine string, tier int, module string, gen int64, opts ...func(*machines.StatusRow)) machines.StatusRow {
	seq := uint64(3)
	r := machines.StatusRow{
		Machine: machine, Tier: tier, Module: module, Generation: &gen, Commit: strings.Repeat("ab", 20),
		Digest: "sha256:" + strings.Repeat("0", 63) + string(rune('0'+gen%10)), State: mesh.StateRunning,
		Health: mesh.HealthHealthy, Plan: meshapi.PlanID(module, strings.Repeat("ab", 20)), Seq: &seq,
	}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func behind(n int64) func(*machines.StatusRow) {
	return func(r *machines.StatusRow) { r.Behind = &n }
}

// status makes a Status of rows, with a machine row for each machine and
// the newest healthy generation of each module.
func status(rows ...machines.StatusRow) machines.Status {
	st := machines.Status{NewestHealthy: map[string]int64{}, Rows: rows}
	seen := map[string]bool{}
	zero := 0
	for _, r := range rows {
		if r.Generation != nil && r.Health == mesh.HealthHealthy && *r.Generation > st.NewestHealthy[r.Module] {
			st.NewestHealthy[r.Module] = *r.Generation
		}
		if seen[r.Machine] {
			continue
		}
		seen[r.Machine] = true
		m := machines.Row{Machine: r.Machine, Tier: r.Tier, HostStatus: machines.HostOK, Queue: &zero}
		if r.HostError != "" {
			m.HostStatus, m.HostError = machines.HostUnreachable, r.HostError
		}
		st.Machines = append(st.Machines, m)
	}
	return st
}

// clock is a settable time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var t0 = time.Date(2026, 10, 2, 14, 0, 0, 0, time.UTC)

// server is the page over src and c, on a test HTTP server.
func server(t *testing.T, src Source, c *config.Config, opts ...func(*Options)) (*httptest.Server, *clock) {
	t.Helper()
	clk := &clock{now: t0}
	o := Options{Source: src, Config: c, Log: zerolog.Nop(), Clock: clk.Now, Wait: 50 * time.Millisecond}
	for _, f := range opts {
		f(&o)
	}
	s, err := New(o)
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, clk
}

// get fetches path and returns the status and body; the client follows no
// redirect.
func get(t *testing.T, srv *httptest.Server, path string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header
}

var errDial = errors.New("dial 127.0.0.1:7233: connection refused")
