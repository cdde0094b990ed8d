package fleetui

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
	"github.com/meshroll/meshroll/internal/window"
)

func edges() *fake {
	return &fake{status: status(row("edge-1", 1, "host", 27), row("control-node", 2, "host", 26, behind(1)))}
}

var twoMachines = cfg("edge-1:1:host", "control-node:2:host")

// Every page says when its data was read, and says what could not be read
// in a line of its own.
func TestSourcesThatFail(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*fake)
		want  []string
		not   []string
	}{
		{name: "all read", want: []string{"Data read at <time datetime=\"2026-10-02T14:00:00Z\">2026-10-02 14:00:00 UTC</time>"}, not: []string{`class="problem"`, "feed"}},
		{
			name: "machine workflows from the worker's feed",
			setup: func(f *fake) {
				at := time.Date(2026, 10, 2, 13, 59, 58, 0, time.UTC)
				f.status.WorkflowsFedAt = &at
			},
			want: []string{"Machine workflows as the worker's feed of their changes had them at <time datetime=\"2026-10-02T13:59:58Z\">2026-10-02 13:59:58 UTC</time>."},
		},
		{
			name:  "Temporal unreachable",
			setup: func(f *fake) { f.statusErr, f.plansErr = errDial, errDial },
			want:  []string{"Temporal unreachable: " + errDial.Error() + " — machine workflows&#39; queues and plans are unknown; what the hosts said is shown."},
			not:   []string{"The plans in flight could not be read"},
		},
		{
			name: "a host unreachable",
			setup: func(f *fake) {
				f.status = status(row("edge-1", 1, "host", 27), machines.StatusRow{Machine: "control-node", Tier: 2, Module: "host", HostError: "host http://127.0.0.1:7400 unreachable: connection refused"})
			},
			want: []string{"1 host did not answer: control-node (unreachable: host http://127.0.0.1:7400 unreachable: connection refused).", `class="cell s-unknown"`},
		},
		{
			name: "many hosts unreachable",
			setup: func(f *fake) {
				var rows []machines.StatusRow
				for _, m := range []string{"a", "b", "c", "d", "e"} {
					rows = append(rows, machines.StatusRow{Machine: m, Tier: 1, Module: "host", HostError: "down"})
				}
				f.status = status(rows...)
			},
			want: []string{"5 hosts did not answer: a (unreachable: down); b (unreachable: down); c (unreachable: down); and 2 more (filter the matrix by state unknown)."},
		},
		{
			name: "a machine workflow did not answer",
			setup: func(f *fake) {
				f.status.Machines[0].WorkflowError, f.status.Machines[0].Queue = "query machine workflow machine/edge-1: deadline exceeded", nil
			},
			want: []string{"1 machine workflow did not answer their state query: their queues are unknown."},
		},
		{
			name: "the machine workflows' list failed",
			setup: func(f *fake) {
				for i := range f.status.Machines {
					f.status.Machines[i].WorkflowError, f.status.Machines[i].Queue = "list machine workflows: deadline exceeded; not asked one by one", nil
				}
			},
			want: []string{"The machine workflows could not be read: list machine workflows: deadline exceeded; not asked one by one — their queues are unknown."},
			not:  []string{"did not answer their state query"},
		},
		{name: "freezes unread", setup: func(f *fake) { f.freezesErr = errors.New("catalogue locked") }, want: []string{"The freezes could not be read: catalogue locked — whether a machine is frozen is unknown.", "Freezes unknown: catalogue locked"}},
		{name: "plans unread", setup: func(f *fake) { f.plansErr = errors.New("visibility down") }, want: []string{"The plans in flight could not be read: visibility down."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := edges()
			if tc.setup != nil {
				tc.setup(src)
			}
			srv, _ := server(t, src, cfg("edge-1:1:host", "control-node:2:host", "a:1:host", "b:1:host", "c:1:host", "d:1:host", "e:1:host"))
			code, body, _ := get(t, srv, "/")
			require.Equal(t, http.StatusOK, code)
			for _, w := range tc.want {
				assert.Contains(t, body, w)
			}
			for _, n := range tc.not {
				assert.NotContains(t, body, n)
			}
			assert.NotContains(t, body, "<strong>Stale:</strong>")
		})
	}
}

// A read that does not end leaves the page on the last snapshot, saying
// how old it is and that it is stale; once the read ends, it is fresh.
func TestStaleWhileAReadHangs(t *testing.T) {
	src := edges()
	srv, clk := server(t, src, twoMachines)
	_, body, _ := get(t, srv, "/")
	require.NotContains(t, body, "Stale")

	block := make(chan struct{})
	src.mu.Lock()
	src.block = block
	src.mu.Unlock()
	clk.add(time.Minute)
	code, body, _ := get(t, srv, "/")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `<div class="fresh stale"`)
	assert.Contains(t, body, "(<span class=\"age\" data-since=\"1790949600000\">1m0s ago</span>)")
	assert.Contains(t, body, "<strong>Stale:</strong> this is the last read that ended; a new read has been under way since 2026-10-02 14:01:00 UTC.")

	close(block)
	require.Eventually(t, func() bool {
		_, body, _ := get(t, srv, "/")
		return !strings.Contains(body, "Stale") && strings.Contains(body, "2026-10-02 14:01:00 UTC</time>")
	}, 5*time.Second, 10*time.Millisecond)
}

// Many viewers share one read, and the fleet is not read again before the
// interval has passed.
func TestOneReadForManyViewers(t *testing.T) {
	src := edges()
	block := make(chan struct{})
	src.block = block
	srv, clk := server(t, src, twoMachines)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			code, _, _ := get(t, srv, "/")
			assert.Equal(t, http.StatusOK, code)
		})
	}
	require.Eventually(t, func() bool { return src.reads() == 1 }, 5*time.Second, time.Millisecond)
	close(block)
	wg.Wait()
	assert.Equal(t, 1, src.reads(), "eight pages, one read")

	clk.add(time.Second)
	get(t, srv, "/plans")
	assert.Equal(t, 1, src.reads(), "within the interval the snapshot is served")
	clk.add(DefaultInterval)
	get(t, srv, "/")
	assert.Equal(t, 2, src.reads(), "past it, a page has the fleet read again")
}

// Nothing anyone can type reaches the page as markup: reasons, errors and
// names are escaped.
func TestEscapesWhatItShows(t *testing.T) {
	evil := `<script>alert("x")</script>`
	// A host reports what it likes: a module name, a plan in its journal.
	unexpected := row("edge-1", 1, evil, 3, func(r *machines.StatusRow) { r.Drift = machines.DriftUnexpected })
	src := &fake{
		status:  status(row("edge-1", 1, "host", 27), unexpected, machines.StatusRow{Machine: "control-node", Tier: 2, Module: "host", HostError: "host " + evil}),
		freezes: []mesh.Freeze{{ID: 1, By: `<b>mallory</b>`, Reason: evil, At: t0}},
		plans: []Plan{{Summary: plans.Summary{Plan: "plan/host/" + strings.Repeat("c", 40), Module: "host", State: "halted"},
			State: &meshapi.PlanState{State: meshapi.PlanHalted, Module: "host", Reason: evil}}},
		details: map[string]machines.Detail{
			"edge-1":       {Machine: "edge-1", Containers: []machines.Container{{Module: evil, Digest: unexpected.Digest, Generation: 3, Plan: evil}}},
			"control-node": {Machine: "control-node", HostError: evil},
		},
		journal: map[string][]machines.JournalEntry{"edge-1": {{Index: 1, Outcome: "applied", Plan: evil, Reason: evil, Message: evil,
			Containers: []machines.JournalContainer{{Module: evil, Digest: unexpected.Digest, Generation: 3}}}}},
	}
	srv, _ := server(t, src, twoMachines)
	escaped := "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;"
	for _, path := range []string{"/", "/plans", "/machines/edge-1", "/machines/control-node", "/nowhere/" + url.PathEscape(evil), "/machines/" + url.PathEscape(evil)} {
		_, body, _ := get(t, srv, path)
		assert.NotContains(t, body, "<script>alert", path)
		assert.NotContains(t, body, "<b>mallory", path)
		if !strings.Contains(path, "%3C") {
			assert.Contains(t, body, escaped, "%s shows it, escaped", path)
		}
	}
}

// The page changes nothing: anything but GET and HEAD is refused.
func TestReadOnly(t *testing.T) {
	srv, _ := server(t, edges(), twoMachines)
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		req, err := http.NewRequest(method, srv.URL+"/", strings.NewReader("x"))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, method)
		assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
	}
	req, err := http.NewRequest(http.MethodHead, srv.URL+"/", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// A full page carries a load ID and the script; a live update carries
// only the part that changes, which is what the script swaps in.
func TestFragment(t *testing.T) {
	srv, _ := server(t, edges(), twoMachines)
	_, full, h := get(t, srv, "/")
	assert.Regexp(t, `<body data-load-id="[0-9a-f]{16}" data-live-updates="0">`, full)
	assert.Contains(t, full, `<script src="/static/fleet.js" defer></script>`)
	assert.Contains(t, h.Get("Content-Security-Policy"), "script-src 'self'")
	_, frag, _ := get(t, srv, "/?fragment=1&state=behind")
	assert.NotContains(t, frag, "<html")
	assert.NotContains(t, frag, "data-load-id")
	assert.Contains(t, frag, `<div class="fresh"`)
	assert.Equal(t, []string{"control-node"}, machinesShown(frag), "the live part keeps the page's filter")
	_, other, _ := get(t, srv, "/")
	assert.NotEqual(t, loadIDOf(full), loadIDOf(other), "every full render has its own load ID")

	code, js, h := get(t, srv, "/static/fleet.js")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, h.Get("Content-Type"), "javascript")
	assert.Contains(t, js, `searchParams.set("fragment", "1")`)
	assert.NotContains(t, js, "http", "the script fetches from nowhere but its own page")
	code, css, _ := get(t, srv, "/static/fleet.css")
	assert.Equal(t, http.StatusOK, code)
	assert.NotContains(t, css, "url(", "nothing fetched from elsewhere")
}

func loadIDOf(body string) string {
	_, rest, _ := strings.Cut(body, `data-load-id="`)
	id, _, _ := strings.Cut(rest, `"`)
	return id
}

// A token is asked of every request when set: as a bearer token, as the
// cookie, or once as ?token=, which sets the cookie and drops itself from
// the address.
func TestToken(t *testing.T) {
	srv, _ := server(t, edges(), twoMachines, func(o *Options) { o.Token = "s3cret" })
	for _, tc := range []struct {
		name   string
		path   string
		header []string
		code   int
		cookie bool
		where  string
	}{
		{name: "none", path: "/", code: http.StatusUnauthorized},
		{name: "wrong bearer", path: "/", header: []string{"Authorization", "Bearer nope"}, code: http.StatusUnauthorized},
		{name: "bearer", path: "/", header: []string{"Authorization", "Bearer s3cret"}, code: http.StatusOK},
		{name: "cookie", path: "/plans", header: []string{"Cookie", cookieName + "=s3cret"}, code: http.StatusOK},
		{name: "wrong cookie", path: "/plans", header: []string{"Cookie", cookieName + "=s3cre"}, code: http.StatusUnauthorized},
		{name: "query once", path: "/?state=behind&token=s3cret", code: http.StatusSeeOther, cookie: true, where: "/?state=behind"},
		{name: "wrong query", path: "/?token=x", code: http.StatusUnauthorized},
		{name: "static too", path: "/static/fleet.js", code: http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, h := get(t, srv, tc.path, tc.header...)
			assert.Equal(t, tc.code, code)
			assert.NotContains(t, body, "s3cret")
			if tc.code == http.StatusUnauthorized {
				assert.Contains(t, body, "worker.ui_token")
			}
			if tc.cookie {
				c := h.Get("Set-Cookie")
				assert.Contains(t, c, cookieName+"=s3cret")
				assert.Contains(t, c, "HttpOnly")
				assert.Contains(t, c, "SameSite=Strict")
				assert.Equal(t, tc.where, h.Get("Location"))
			}
		})
	}
	open, _ := server(t, edges(), twoMachines)
	code, _, _ := get(t, open, "/")
	assert.Equal(t, http.StatusOK, code, "no token set: loopback, open")
}

// A deny window that holds, and a freeze, are said where roll-outs are.
func TestHolds(t *testing.T) {
	deny, err := window.New(true, "0 12 * * *", 6*time.Hour, "UTC", "change freeze")
	require.NoError(t, err)
	c := cfg("edge-1:1:host", "control-node:2:host")
	c.Windows = []config.Window{{Deny: deny.Spec, Duration: deny.Duration, TimeZone: "UTC", Reason: deny.Reason}}
	src := edges()
	src.freezes = []mesh.Freeze{{ID: 4, Machine: "control-node", By: "alice", Reason: "disk swap", At: t0}}
	srv, _ := server(t, src, c)
	_, body, _ := get(t, srv, "/")
	assert.Contains(t, body, "frozen</span> machine control-node by <b>alice</b> since 2026-10-02 14:00:00 UTC: disk swap <code>starter unfreeze --machine control-node</code>")
	assert.Contains(t, body, "Deployment windows: <b>closed</b> by the deny window deny &#34;0 12 * * *&#34; for 6h0m0s in UTC (change freeze);")
	assert.Contains(t, body, "they open at 2026-10-02 18:00:00 UTC.")
	assert.Contains(t, body, `class="cell s-behind frozen"`, "the control node's cell is outlined as frozen")
}

func TestNotFound(t *testing.T) {
	srv, _ := server(t, edges(), twoMachines)
	code, body, _ := get(t, srv, "/machines/edge-9")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, "The mesh config has no machine &#34;edge-9&#34;.")
	code, _, _ = get(t, srv, "/nowhere")
	assert.Equal(t, http.StatusNotFound, code)
	code, body, _ = get(t, srv, "/machines/edge-1?before=x")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "is not an entry index")
}

// Machines waiting to join are listed above the matrix, with what admits
// them; a fleet without any shows no such section.
func TestPendingMachines(t *testing.T) {
	src := edges()
	src.status.Pending = []meshapi.Enrollment{{State: meshapi.EnrollPending,
		Ask: meshapi.EnrollAsk{Machine: "edge-9", Host: "http://10.0.0.9:7400", Labels: map[string]string{"site": "fra1"}, At: t0.Add(-90 * time.Second)}}}
	srv, _ := server(t, src, twoMachines)
	_, body, _ := get(t, srv, "/")
	assert.Contains(t, body, "Waiting to join: 1 machine</h2>")
	assert.Contains(t, body, `<tr><th scope="row">edge-9</th><td><code>http://10.0.0.9:7400</code></td><td>site=fra1</td>`)
	assert.Contains(t, body, "<code>starter machine approve NAME</code>")

	srv, _ = server(t, edges(), twoMachines)
	_, body, _ = get(t, srv, "/")
	assert.NotContains(t, body, "Waiting to join")
}
