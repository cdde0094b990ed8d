package testsuite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// envWriteScreenshots, when set, has TestFleetPageFollowsAGatedPlan write
// its screenshots into docs/ (what docs/fleet-page.md shows); CI leaves it
// unset, so that a test run does not change the tree.
const envWriteScreenshots = "MESHROLL_WRITE_SCREENSHOTS"

// The fleet page on the dev stack as an on-call person reads it, in
// headless chromium, while a merge waits at its gate before tier 2: the
// matrix shows the new generation on tier 1 and the old one on tier 2, the
// plan waits at its gate with the command that approves it, and the
// machine page lists the push's journal entry. After the approval the
// matrix page, left open, shows the control node on the new generation
// without being reloaded.
//
// How "without a reload" is proven: once the page is loaded the test plants
// a random marker in the page's JavaScript global scope. A reload, or any
// navigation, starts a new document with a new global scope, where the
// marker is gone; the marker read back after the update is the same
// document. Besides, the server renders a fresh load ID into <body> on every
// full page and never into a live update, so an unchanged load ID is the
// same rendered page; and the page's script counts the live updates it has
// swapped in, which must have grown. The new generation can only have
// arrived through those swaps.
func TestFleetPageFollowsAGatedPlan(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	cli := dsTemporalCLI(t)
	bins := dsBuild(t, "worker", "starter")
	m := dsScratchMesh(t)
	st := dsStartStack(t, bins, m, t.TempDir(), cli)
	fleet := "http://" + m.fleet

	// Every module converges everywhere; then a merge of host waits at its
	// gate before tier 2.
	c1 := m.commitHost(t)
	for _, module := range []string{"mesh-controller", "metrics", "host"} {
		dsStarter(t, bins, m, "merge", "--module", module, "--commit", c1, "--wait", "--output", "json")
	}
	old := dsPlanShow(t, bins, m, meshapi.PlanID("host", c1)).Build.Generation
	c2 := m.commitHost(t)
	plan := meshapi.PlanID("host", c2)
	dsStarter(t, bins, m, "merge", "--module", "host", "--commit", c2, "--gate", "2", "--output", "json")
	gated := dsWaitPlan(t, bins, m, plan, meshapi.PlanGated)
	next := gated.Build.Generation
	require.Greater(t, next, old)
	approve := fmt.Sprintf("starter plan approve %s --tier 2", plan)

	tab := browserTab(t, browser)
	ctx, cancel := context.WithTimeout(tab, 4*time.Minute)
	defer cancel()
	run := func(ctx context.Context, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		_, err := chromedp.Run(ctx, a)
		require.NoError(t, err)
	}
	gen := func(machine string) string {
		return fmt.Sprintf(`(document.querySelector('[data-cell="%s/host"]') || {dataset: {}}).dataset.gen`, machine)
	}
	has := func(text string) string {
		return fmt.Sprintf(`document.body.innerText.includes(%q)`, text)
	}
	waitFor := func(ctx context.Context, what, expr string) {
		t.Helper()
		err := pollPage(ctx, expr, 90*time.Second)
		if err != nil {
			body, _ := chromedp.Run(ctx, chromedp.Text("body"))
			t.Fatalf("the fleet page never showed %s: %v\n%s", what, err, body)
		}
	}

	// open loads a page and waits for what it must show, loading it again
	// if it failed to load (see openPage).
	open := func(ctx context.Context, page, what, expr string) {
		t.Helper()
		if err := openPage(t, ctx, page, expr, 90*time.Second); err != nil {
			body, _ := chromedp.Run(ctx, chromedp.Text("body"))
			t.Fatalf("the fleet page never showed %s: %v\n%s", what, err, body)
		}
	}

	// The matrix while the plan waits at its gate.
	run(ctx, chromedp.EmulateViewport(1400, 1000))
	open(ctx, fleet+"/", "tier 1 on the new generation, tier 2 on the old one, the plan at its gate",
		fmt.Sprintf(`%s === %q && %s === %q && %s === %q && %s && %s`,
			gen("edge-1"), strconv.FormatInt(next, 10), gen("edge-2"), strconv.FormatInt(next, 10), gen("control-node"), strconv.FormatInt(old, 10),
			has("waiting at its gate before tier 2"), has(approve)))
	screenshot(t, ctx, "fleet-matrix.png")

	var b [8]byte
	_, _ = rand.Read(b[:])
	marker := hex.EncodeToString(b[:])
	loadID, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`window.fleetTestMarker = %q; document.body.dataset.loadId`, marker)))
	require.NoError(t, err)
	require.Len(t, loadID, 16, "the page carries its load ID")
	updates := func() int {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.liveUpdates`))
		require.NoError(t, err)
		v, err := strconv.Atoi(n)
		require.NoError(t, err)
		return v
	}
	before := updates()

	// The plan's page and the machine's page, in another tab so that the
	// matrix stays as it was loaded.
	other, cancelOther := chromedp.NewContext(tab)
	defer cancelOther()
	run(other, chromedp.EmulateViewport(1400, 1000))
	open(other, fleet+"/plans", "the plan waiting at its gate with the command that approves it",
		has("Waiting at its gate before tier 2.")+" && "+has(approve)+" && "+has(plan))
	screenshot(t, other, "fleet-plans.png")
	webUI, err := chromedp.Run(other, chromedp.Evaluate[string](`(document.querySelector('a.ext') || {}).href || ""`))
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("http://127.0.0.1:%d/namespaces/default/workflows/%s", m.ui, url.PathEscape(plan)), webUI, "the plan links to its page in the Temporal Web UI")

	var shown struct {
		Journal []struct {
			Seq     uint64 `json:"seq"`
			Plan    string `json:"plan"`
			Outcome string `json:"outcome"`
		} `json:"journal"`
	}
	out := dsStarter(t, bins, m, "machine", "show", "edge-1", "--journal", "20", "--output", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &shown), out)
	var push uint64
	for _, e := range shown.Journal {
		if e.Plan == plan && e.Outcome == "applied" {
			push = e.Seq
		}
	}
	require.NotZero(t, push, "edge-1's journal has the push of %s: %s", plan, out)
	open(other, fleet+"/machines/edge-1", "the push's journal entry on edge-1's page",
		fmt.Sprintf(`Array.from(document.querySelectorAll("table.journal tr.o-applied")).some(r => r.innerText.includes(%q) && r.cells[3].innerText.trim() === %q)`,
			plan, strconv.FormatUint(push, 10))+" && "+has("What runs, and why"))
	screenshot(t, other, "fleet-machine.png")

	// Approve; the open matrix follows without a reload.
	require.Contains(t, dsStarter(t, bins, m, "plan", "approve", plan), "tier 2")
	waitFor(ctx, "the control node on the new generation after the approval", fmt.Sprintf(`%s === %q`, gen("control-node"), strconv.FormatInt(next, 10)))
	kept, err := chromedp.Run(ctx, chromedp.Evaluate[string](`String(window.fleetTestMarker) + " " + document.body.dataset.loadId`))
	require.NoError(t, err)
	require.Equal(t, marker+" "+loadID, kept, "the page that shows the approval is the page loaded before it: not reloaded")
	require.Greater(t, updates(), before, "the new generation came in a live update")
	header, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("conn").textContent`))
	require.NoError(t, err)
	require.Regexp(t, `^live: updated \d\d:\d\d:\d\d UTC \(\d+ updates?\)$`, header, "the header's time is in UTC, as every time the worker writes on the page")
	dsWaitPlan(t, bins, m, plan, meshapi.PlanConverged)
	st.interrupt(t)
}

// screenshot writes the tab's page into docs/ when envWriteScreenshots is
// set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv(envWriteScreenshots) == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join("..", "docs", name), png, 0o644))
	t.Logf("wrote docs/%s", name)
}
