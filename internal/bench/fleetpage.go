package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/bench/report"
	"github.com/meshroll/meshroll/internal/bench/stack"
	"github.com/meshroll/meshroll/internal/catalogue/sqlcat"
	"github.com/meshroll/meshroll/internal/cli"
	"github.com/meshroll/meshroll/internal/fleetui"
	"github.com/meshroll/meshroll/internal/machinefeed"
	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/plans"
)

// fleetPageLoads is how many times each way of loading the matrix is
// timed per run.
const fleetPageLoads = 5

// EnvFleetScreenshot, when set to a file name, has the fleet-page scenario
// take a screenshot of its matrix there with chromium (headless), so that
// docs/fleet-page.md can show the size of fleet it measured.
const EnvFleetScreenshot = "MESHROLL_BENCH_FLEET_SCREENSHOT"

// fleetPage loads the fleet page's matrix over a mesh of n machines in
// three tiers, every one running the fleet's module at one converged
// build: read and rendered (every host and machine workflow asked, as the
// first viewer after the interval waits for), and rendered from that read
// (what every other viewer within the interval gets); and how big the page
// is. It asserts nothing of the times.
func (b *bench) fleetPage(ctx context.Context, run int) error {
	n := b.sz.fleetPage
	m, err := b.startFleet(ctx, fmt.Sprintf("bench-fleetpage-%d", run), fleetSpecs(fmt.Sprintf("fp%dr%d", n, run), n, tiers), stack.MeshOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = m.Close() }()
	if _, err := b.planFleet(ctx, m); err != nil {
		return err
	}
	src := fleetui.Reader{Config: m.Config, Client: b.srv.Client(), Catalogue: m.Catalogue}
	scenario := fmt.Sprintf("fleet page %d", n)

	// The machine workflows as the worker's feed keeps them in its
	// catalogue (its first look lists every one).
	kept := machinefeed.Kept{Store: m.Catalogue}
	if err := waitFed(ctx, kept, m.Config.MachineNames()); err != nil {
		return err
	}
	fed := src
	fed.Feed = kept

	// The first viewer waits for the fleet to be read: each such load is
	// timed on a page of its own, which has read nothing yet (and reads
	// again only after an hour, so that what follows is rendered from one
	// read). Read as the worker reads it (the machine workflows from its
	// feed) and, alternately, listing every machine workflow.
	for range fleetPageLoads {
		for _, way := range []readWay{
			{fed, "matrix, first viewer: hosts from the picture, machine workflows from the worker's feed, then rendered"},
			{src, "matrix, first viewer, without the feed: every machine workflow listed, then rendered"},
		} {
			url, stop, err := b.serveFleetPage(way.src, m, time.Hour)
			if err != nil {
				return err
			}
			took, _, err := loadPage(ctx, url)
			stop()
			if err != nil {
				return err
			}
			b.t.Add(scenario, way.name, "ms", "", millis(took))
		}
	}
	// What the feed costs between its whole lists: a look at what
	// changed, with nothing moving.
	for range fleetPageLoads {
		start := time.Now()
		if _, err := plans.MachineSummariesSince(ctx, b.srv.Client(), m.Config.Temporal.Namespace, m.Config.Temporal.TaskQueue, start.Add(-machinefeed.DefaultOverlap)); err != nil {
			return fmt.Errorf("fleet page: the feed's look: %w", err)
		}
		b.t.Add(scenario, "the worker's feed: one look at what changed (nothing moving)", "ms", "", millis(time.Since(start)))
	}
	// What starter status reads (the CLI's start and its table aside): the
	// hosts from the picture, the machine workflows from the feed the
	// worker keeps beside it and, alternately, from one visibility list.
	for range fleetPageLoads {
		for _, way := range []readWay{
			{fed, "status read: hosts from the picture, machine workflows from the worker's feed"},
			{src, "status read, without the feed: machine workflows from one visibility list"},
		} {
			start := time.Now()
			st, err := way.src.Status(ctx)
			took := time.Since(start)
			if err != nil {
				return fmt.Errorf("fleet page: status: %w", err)
			}
			if err := everyWorkflowRead(st, n); err != nil {
				return err
			}
			b.t.Add(scenario, way.name, "ms", "", millis(took))
		}
	}
	// starter status as an operator runs it, in process: its start,
	// mesh.yaml, the catalogue's two reads, the freezes' lever and the
	// table, on an SQLite catalogue where the starter finds it holding the
	// worker's picture and feed.
	if err := b.starterStatus(ctx, m, scenario); err != nil {
		return err
	}
	// Of the first viewer's wait, the hosts' part alone: one read of the
	// fleet picture the worker keeps, the machine workflows not asked.
	for range fleetPageLoads {
		start := time.Now()
		st, _ := machines.ReadStatus(ctx, m.Config, machines.Sources{Dial: noTemporal, Hosts: m.Catalogue.HostStates}, machines.StatusFilter{})
		took := time.Since(start)
		if len(st.Machines) != n {
			return fmt.Errorf("fleet page: the status has %d machines; want %d", len(st.Machines), n)
		}
		b.t.Add(scenario, "status, the hosts' part alone: one read of the fleet picture", "ms", "", millis(took))
	}
	// Viewers within the interval get the page rendered from that read.
	url, stop, err := b.serveFleetPage(src, m, time.Hour)
	if err != nil {
		return err
	}
	defer stop()
	if _, _, err := loadPage(ctx, url); err != nil {
		return err
	}
	for range fleetPageLoads {
		took, size, err := loadPage(ctx, url)
		if err != nil {
			return err
		}
		b.t.Add(scenario, "matrix, other viewers: rendered from the last read", "ms", "", millis(took))
		b.t.Add(scenario, "matrix page size, uncompressed", "KiB", "", float64(size.plain)/1024)
		b.t.Add(scenario, "matrix page size, gzip (as served)", "KiB", "", float64(size.gzip)/1024)
	}
	if shot := os.Getenv(EnvFleetScreenshot); shot != "" && run == 0 {
		// As the worker serves it: the default interval.
		url, stop, err := b.serveFleetPage(src, m, 0)
		if err != nil {
			return err
		}
		if err := chromiumScreenshot(ctx, url, shot); err != nil {
			b.progress("fleet page screenshot: %v", err)
		}
		stop()
	}
	if load, ok := report.LoadAverage(); ok {
		b.t.Add(scenario, "box load average (1 min) after the loads", "", "the bench's own server, worker and agents included", load)
	}
	return nil
}

// readWay is one way of reading the fleet the scenario times, and its
// row's name.
type readWay struct {
	src  fleetui.Reader
	name string
}

// starterStatus times `starter status` over m, fleetPageLoads times, on a
// copy of the worker's picture and feed (m's memory catalogue) in the
// SQLite catalogue the starter opens by default (beside mesh.yaml); the
// feed is copied again before each, as the worker keeps it current.
func (b *bench) starterStatus(ctx context.Context, m *stack.Mesh, scenario string) error {
	cat, err := sqlcat.Open(ctx, m.Config.CatalogueDSN(filepath.Dir(m.ConfigPath)))
	if err != nil {
		return fmt.Errorf("fleet page: starter status: %w", err)
	}
	defer func() { _ = cat.Close() }()
	hs, err := m.Catalogue.HostStates(ctx)
	if err != nil {
		return err
	}
	for _, h := range hs {
		if h.Report == nil {
			continue
		}
		if _, err := cat.RecordHostReport(ctx, h.Machine, *h.Report, h.Revision, h.HeardAt); err != nil {
			return fmt.Errorf("fleet page: starter status: %w", err)
		}
	}
	for i := range fleetPageLoads + 1 {
		asOf, body, ok, err := m.Catalogue.MachineFeed(ctx)
		if err != nil || !ok {
			return fmt.Errorf("fleet page: starter status: the worker keeps no feed (%v)", err)
		}
		if err := cat.KeepMachineFeed(ctx, asOf, body); err != nil {
			return fmt.Errorf("fleet page: starter status: %w", err)
		}
		var out, errb bytes.Buffer
		args := []string{"--config", m.ConfigPath, "status"}
		if i == 0 {
			// Untimed: that it reads what it is timed reading.
			args = append(args, "--output", "json")
		}
		start := time.Now()
		err = cli.Execute(ctx, args, &out, &errb)
		took := time.Since(start)
		if err != nil {
			return fmt.Errorf("fleet page: starter status: %w: %s", err, errb.String())
		}
		if i == 0 {
			var st machines.Status
			if err := json.Unmarshal(out.Bytes(), &st); err != nil {
				return fmt.Errorf("fleet page: starter status --output json: %w", err)
			}
			if st.HostsFrom != machines.HostsFromPicture || st.WorkflowsFedAt == nil {
				return fmt.Errorf("fleet page: starter status read its hosts from %q and its machine workflows from the feed: %v; want the picture and the feed", st.HostsFrom, st.WorkflowsFedAt != nil)
			}
			continue
		}
		if rows := strings.Count(out.String(), "\n"); rows < len(hs) {
			return fmt.Errorf("fleet page: starter status printed %d lines for %d machines", rows, len(hs))
		}
		b.t.Add(scenario, "starter status, the whole command: hosts and machine workflows from the catalogue, every row printed", "ms", "", millis(took))
	}
	return nil
}

// waitFed waits for the worker's feed to show every machine of names
// settled after the plan that pushed them: a last sequence, nothing in
// flight or queued.
func waitFed(ctx context.Context, feed machinefeed.Kept, names []string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	settled := func() bool {
		sums, _, ok := feed.Summaries(ctx)
		for _, name := range names {
			s, in := sums.ByMachine[name]
			if !ok || !in || s.LastSeq == 0 || s.Current != nil || s.Queue != 0 {
				return false
			}
		}
		return true
	}
	for !settled() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("fleet page: the worker's feed did not show the %d machine workflows settled: %w", len(names), ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// everyWorkflowRead checks that a status of n machines, each pushed by the
// bench's plan, read every machine workflow.
func everyWorkflowRead(st machines.Status, n int) error {
	if len(st.Machines) != n {
		return fmt.Errorf("fleet page: the status has %d machines; want %d", len(st.Machines), n)
	}
	for _, m := range st.Machines {
		if m.LastSeq == nil || m.WorkflowError != "" {
			return fmt.Errorf("fleet page: machine %s: its workflow was not read (%s)", m.Machine, m.WorkflowError)
		}
	}
	return nil
}

// errNoTemporal is the dial of a read that asks no machine workflow.
var errNoTemporal = errors.New("not asked: the hosts' part alone")

func noTemporal(context.Context) (client.Client, error) { return nil, errNoTemporal }

// pageSize is a page's size as rendered and as sent.
type pageSize struct{ plain, gzip int }

// serveFleetPage serves the fleet page over src on a loopback port,
// reading the fleet again once its snapshot is older than interval (0: the
// worker's default).
func (b *bench) serveFleetPage(src fleetui.Source, m *stack.Mesh, interval time.Duration) (string, func(), error) {
	page, err := fleetui.New(fleetui.Options{Source: src, Config: m.Config, Log: b.log, Interval: interval, Wait: time.Minute})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("fleet page: %w", err)
	}
	srv := &http.Server{Handler: page, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/", func() { _ = srv.Close() }, nil
}

// loadPage GETs url as a browser does (gzip accepted) and returns how long
// the whole answer took and its size.
func loadPage(ctx context.Context, url string) (time.Duration, pageSize, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, pageSize{}, err
	}
	req.Header.Set("Accept-Encoding", "gzip")
	start := time.Now()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return 0, pageSize{}, fmt.Errorf("fleet page: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	zipped, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	if err != nil {
		return 0, pageSize{}, fmt.Errorf("fleet page: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, pageSize{}, fmt.Errorf("fleet page: %s", resp.Status)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped))
	if err != nil {
		return 0, pageSize{}, fmt.Errorf("fleet page: not gzip: %w", err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		return 0, pageSize{}, fmt.Errorf("fleet page: %w", err)
	}
	if !strings.Contains(string(plain), `class="dot s-healthy"`) {
		return 0, pageSize{}, errors.New("fleet page: the matrix shows no healthy machine")
	}
	return took, pageSize{plain: len(plain), gzip: len(zipped)}, nil
}

// chromiumScreenshot has headless chromium take a screenshot of url into
// file.
func chromiumScreenshot(ctx context.Context, url, file string) error {
	file, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
		"--virtual-time-budget=3000", "--screenshot="+file, url).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chromium: %w: %s", err, out)
	}
	return nil
}
