package testsuite

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// A person who only has the Web UI finds the plan: the workflow list
// filtered by the module's search attribute shows the plan with its summary.
func TestWebUIFindsPlanByModule(t *testing.T) {
	browser := chromium(t)
	o := exampleMesh()
	o.uiPort = freePort(t)
	s := newStack(t, o)
	_ = s.commit("mesh-controller")
	h1 := s.commit("host")
	plan := s.converge("host", h1).Plan

	bctx := browserTab(t, browser)
	ctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()

	query := fmt.Sprintf("%s = 'host'", meshapi.SAModule.GetName())
	page := fmt.Sprintf("http://127.0.0.1:%s/namespaces/default/workflows?query=%s", o.uiPort, url.QueryEscape(query))
	summary := "merge of host at " + h1[:12]
	has := func(text string) string {
		return fmt.Sprintf(`document.body && document.body.innerText.includes(%q)`, text)
	}
	// The list is filled by the UI's own requests; wait until the plan's
	// row is there, then read the page.
	_, err := chromedp.Run(ctx, chromedp.Navigate(page))
	require.NoError(t, err, "Web UI at %s", page)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](has(plan), chromedp.WithPollingTimeout(90*time.Second)))
	require.NoError(t, err, "the plan %s in the list at %s", plan, page)
	body, err := chromedp.Run(ctx, chromedp.Text("body"))
	require.NoError(t, err)
	require.Contains(t, body, plan)
	if dir := os.Getenv("MESHROLL_UI_SCREENSHOT"); dir != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "ui-plans.png"), png, 0o644))
	}
	if !strings.Contains(body, summary) {
		// The list may not show summaries; the plan's own page does.
		_, err := chromedp.Run(ctx, chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%s/namespaces/default/workflows/%s", o.uiPort, url.PathEscape(plan))))
		require.NoError(t, err)
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](has(summary), chromedp.WithPollingTimeout(60*time.Second)))
		require.NoError(t, err, "the plan's page shows its summary %q", summary)
	}
}
