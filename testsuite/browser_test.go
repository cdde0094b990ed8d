package testsuite

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/meshroll/meshroll/internal/agent/dockertest"
)

// browserTab starts Debian's headless chromium (browser) for the test and
// returns a context for its first tab; chromedp.NewContext(tab) opens
// another tab of the same browser. Everything stops with the test.
func browserTab(t *testing.T, browser string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1600, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	return tab
}

// pollPage waits, within d, until the JavaScript expression js is true on
// the tab's current page. A single-page UI may replace the page's
// JavaScript context while it routes (the Web UI sends a workflow's page on
// to its run), which ends a chromedp poll with "Cannot find context with
// specified id"; the poll then starts again in the new context, within the
// same deadline. An error says what the page showed when it gave up, so
// that a failure on a CI box can be read without a screenshot.
func pollPage(ctx context.Context, js string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "Cannot find context with specified id") || !time.Now().Before(deadline) {
			return fmt.Errorf("%w; the page showed: %s", err, pageShows(ctx))
		}
	}
}

// openPage loads page in the tab and waits, within d, until the
// JavaScript expression js is true there, no container starting or
// stopping on the bridge engine meanwhile (dockertest.HoldQuietNetwork):
// each adds or removes a network interface, and Chromium then fails every
// request in flight (net::ERR_NETWORK_CHANGED; in CI every script of the
// Web UI failed so, in two loads 30 s apart). A page is loaded again, as a
// person would, until d runs out: at once when one of its requests failed
// so all the same, and when after a quarter of d it has rendered nothing,
// the Web UI's own error page ("Uh oh. There's an error", which says "Try
// a refresh") or Chromium's for a load that failed. Seen in CI on a busy
// box besides: the page blank for 90 s, its scripts never started. That is
// the page's start, not what a test reads on it.
//
// What went wrong in the tab on the way (requests refused or failed,
// uncaught exceptions, console errors) is logged with a page that did not
// render and wrapped into the error, so that a failure on a CI box says
// which of the UI's requests broke.
func openPage(t *testing.T, ctx context.Context, page, js string, d time.Duration) error {
	t.Helper()
	trouble, err := watchTrouble(ctx)
	if err != nil {
		return fmt.Errorf("watch %s: %w", page, err)
	}
	defer dockertest.HoldQuietNetwork(t)()
	deadline, step := time.Now().Add(d), d/4
	over := func() bool { return !time.Now().Before(deadline) || ctx.Err() != nil }
	for {
		trouble.reset()
		loaded := time.Now()
		if _, err := chromedp.Run(ctx, chromedp.Navigate(page)); err != nil {
			// A load that failed outright (the page's own request).
			if over() {
				return fmt.Errorf("open %s: %w; what went wrong in the tab: %s", page, err, trouble)
			}
			t.Logf("loading %s failed (%v); loading it again", page, err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for {
			// In short looks, so that a page whose requests failed is
			// loaded again at once.
			err := pollPage(ctx, js, min(2*time.Second, time.Until(deadline)))
			if err == nil {
				return nil
			}
			if over() {
				return fmt.Errorf("%w; what went wrong in the tab: %s", err, trouble)
			}
			if trouble.changed() || (time.Since(loaded) >= step && stuck(ctx)) {
				break
			}
		}
		t.Logf("%s: not shown, loading it again: the tab shows %s; what went wrong in it: %s", page, pageShows(ctx), trouble)
	}
}

// stuck says whether the tab shows nothing, the Web UI's error page or
// Chromium's: a page to load again rather than wait on.
func stuck(ctx context.Context) bool {
	s, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`location.protocol === "chrome-error:" || !document.body || document.body.innerText.trim() === "" || document.body.innerText.includes("There's an error")`))
	return err == nil && s
}

// tabTrouble keeps what went wrong in a tab, in order: requests answered
// 400 or more or that failed, uncaught exceptions and console errors.
type tabTrouble struct {
	mu    sync.Mutex
	urls  map[network.RequestID]string
	lines []string
	// networkChanged says a request failed with net::ERR_NETWORK_CHANGED.
	networkChanged bool
}

// maxTrouble bounds what a tabTrouble keeps.
const maxTrouble = 40

// watchTrouble starts keeping what goes wrong in the tab of ctx (chromedp
// enables the network and runtime events of every tab it opens).
func watchTrouble(ctx context.Context) (*tabTrouble, error) {
	tr := &tabTrouble{urls: map[network.RequestID]string{}}
	err := chromedp.Listen(ctx, func(ev any) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			tr.urls[e.RequestID] = e.Request.URL
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 {
				tr.add(fmt.Sprintf("%d %s", e.Response.Status, e.Response.URL))
			}
		case *network.EventLoadingFailed:
			tr.add(fmt.Sprintf("request %s failed: %s", tr.urls[e.RequestID], e.ErrorText))
			tr.networkChanged = tr.networkChanged || e.ErrorText == "net::ERR_NETWORK_CHANGED"
		case *runtime.EventExceptionThrown:
			x := e.ExceptionDetails
			text := x.Text
			if x.Exception != nil && x.Exception.Description != "" {
				text += " " + x.Exception.Description
			}
			tr.add("exception: " + text)
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				var args []string
				for _, a := range e.Args {
					if a.Description != "" {
						args = append(args, a.Description)
					} else {
						args = append(args, string(a.Value))
					}
				}
				tr.add("console error: " + strings.Join(args, " "))
			}
		}
	})
	return tr, err
}

// add keeps a line; the caller holds mu.
// reset forgets what went wrong so far: a page loaded again starts anew.
func (tr *tabTrouble) reset() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.lines, tr.networkChanged = nil, false
}

// changed says whether a request of the page failed because the box's
// network changed under it.
func (tr *tabTrouble) changed() bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.networkChanged
}

func (tr *tabTrouble) add(line string) {
	if len(tr.lines) < maxTrouble {
		tr.lines = append(tr.lines, strings.TrimSpace(line))
	}
}

// String is the lines kept, or "nothing seen".
func (tr *tabTrouble) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.lines) == 0 {
		return "nothing seen"
	}
	return fmt.Sprintf("%q", tr.lines)
}

// pageShows is the tab's address and the start of its text, for an error.
func pageShows(ctx context.Context) string {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	js := `location.href + "\n" + (document.body ? document.body.innerText.slice(0, 1500) : "(no body)")`
	shown, err := chromedp.Run(sctx, chromedp.Evaluate[string](js))
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	return fmt.Sprintf("%q", shown)
}
