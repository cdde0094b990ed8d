package testsuite

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// chromium finds Debian's chromium, skipping (or failing in CI) without it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("MESHROLL_CHROMIUM"), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium for the Web UI test: apt-get install chromium (or set MESHROLL_CHROMIUM)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// A person who only has the Web UI finds the plan and reads the truth: the
// workflow list filtered by the module's search attribute shows the plan
// with its summary; a gated plan's page lists its tiers and says it waits
// for approval; a plan aborted at its gate is not a green "Completed"; and a
// machine workflow's page says what the machine runs.
func TestWebUIFindsPlanByModule(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	o := exampleMesh()
	o.uiPort = freePort(t)
	s := newStack(t, o)
	_ = s.commit("mesh-controller")
	h1 := s.commit("host")
	plan := s.converge("host", h1).Plan
	h2 := s.commit("host")
	gated := s.start("host", h2, 2).ID
	atGate := waitFor(t, s, gated, meshapi.PlanGated)
	require.NotNil(t, atGate.Build)

	bctx := browserTab(t, browser)
	ctx, cancel := context.WithTimeout(bctx, 4*time.Minute)
	defer cancel()

	ui := "http://127.0.0.1:" + o.uiPort + "/namespaces/default/workflows"
	query := fmt.Sprintf("%s = 'host'", meshapi.SAModule.GetName())
	list := ui + "?query=" + url.QueryEscape(query)
	// pageText is the text of the page and of its frames: the UI renders
	// a workflow's Markdown details in a frame of their own.
	const pageText = `[document.body ? document.body.innerText : ""].concat(Array.from(document.querySelectorAll("iframe")).map(f => { try { return f.contentDocument.body.innerText } catch (e) { return "" } })).join("\\n")`
	has := func(text string) string {
		return fmt.Sprintf(`%s.includes(%q)`, pageText, text)
	}
	// open loads a page and waits until the UI's own requests have put
	// the condition's text there (js is a boolean expression).
	open := func(page, js, what string) {
		t.Helper()
		require.NoError(t, openPage(t, ctx, page, js, 90*time.Second), "%s at %s", what, page)
	}
	// tab opens a tab of a workflow's page.
	tab := func(name string) {
		t.Helper()
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(
			`(() => { const t = Array.from(document.querySelectorAll("a, button, [role=tab]")).find(e => e.innerText.trim() === %q); if (t) t.click(); return !!t })()`, name)))
		require.NoError(t, err)
		require.True(t, ok, "a tab %q", name)
	}
	screenshot := func(name string) {
		if dir := os.Getenv("MESHROLL_UI_SCREENSHOT"); dir != "" {
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
		}
	}

	open(list, has(plan), "the plan "+plan+" in the list")
	body, err := chromedp.Run(ctx, chromedp.Text("body"))
	require.NoError(t, err)
	screenshot("ui-plans.png")
	if summary := "merge of host at " + h1[:12]; !strings.Contains(body, summary) {
		// The list may not show summaries; the plan's own page does.
		open(ui+"/"+url.PathEscape(plan), has(summary), "the plan's summary")
	}

	// The gated plan's page: its current details say it waits, and list
	// the tiers as a list, not one run-on line.
	open(ui+"/"+url.PathEscape(gated), has("User Metadata"), "the gated plan's page")
	tab("User Metadata")
	err = pollPage(ctx, has("waiting for approval before tier 2"), 30*time.Second)
	require.NoError(t, err, "the gated plan's current details say it waits")
	err = pollPage(ctx, has("starter plan approve "+gated+" --tier 2"), 10*time.Second)
	require.NoError(t, err, "the gated plan's current details say how to approve")
	items := `Array.from(document.querySelectorAll("iframe")).flatMap(f => { try { return Array.from(f.contentDocument.querySelectorAll("li")) } catch (e) { return [] } }).concat(Array.from(document.querySelectorAll("li"))).map(li => li.innerText.trim())`
	err = pollPage(ctx, items+`.some(t => t.startsWith("tier 2: gated"))`, 30*time.Second)
	require.NoError(t, err, "the gated plan's tiers are list items")
	err = pollPage(ctx, items+`.some(t => t.startsWith("commit: "))`, 30*time.Second)
	require.NoError(t, err, "the plan's static details are list items")
	screenshot("ui-plan-gated.png")

	// Aborted at its gate: the list shows it failed, not completed.
	_, err = controlPlan(s, gated, meshapi.UpdateAbort, meshapi.AbortInput{By: "ui-test", Reason: "checking the list"})
	require.NoError(t, err)
	require.Equal(t, meshapi.PlanAborted, s.wait(gated).State)
	row := fmt.Sprintf(`(Array.from(document.querySelectorAll("tr, [role=row]")).find(r => r.innerText.includes(%q)) || {innerText: ""}).innerText`, gated)
	open(list, row+`.includes("Failed")`, "the aborted plan's row marked Failed")
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](row))
	require.NoError(t, err)
	require.NotContains(t, text, "Completed", "the aborted plan's row")
	screenshot("ui-plans-aborted.png")

	// A machine workflow's page says what the machine runs.
	open(ui+"/"+url.PathEscape(meshapi.MachineID("edge-1")), has("User Metadata"), "the machine workflow's page")
	tab("User Metadata")
	// Tier 1 took the gated plan's build before the abort.
	runs := fmt.Sprintf("host generation %d", atGate.Build.Generation)
	err = pollPage(ctx, has("last sequence sent")+" && "+has(runs), 30*time.Second)
	require.NoError(t, err, "edge-1's current details say what it runs (%s)", runs)
	screenshot("ui-machine.png")
}
