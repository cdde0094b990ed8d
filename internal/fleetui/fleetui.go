// Package fleetui is the fleet page: a read-only web page, served by the
// worker, that answers the first question of someone paged at night — what
// does the fleet run right now, and what is moving? — without running
// `starter machine show` once per machine.
//
// It has three pages: the fleet matrix (machines by tier × modules, each
// cell the build, its health and its state), the plans in flight (tiers,
// batches, every machine's progress, the gate a plan waits at with the
// command that opens it, the freezes and windows that hold it, each plan
// linked to the Temporal Web UI) and a machine's page (what runs and why,
// its machine workflow, its journal, paged). They read the same sources as
// the starter (package machines, package plans, the catalogue's freezes and
// rejections, the config's windows) through Source, and change nothing:
// every page is GET. Beside them it serves the Temporal Web UI's codec
// endpoint (CodecPath), which decodes the payloads meshroll stores
// compressed and changes nothing either.
//
// The pages are plain server-rendered html/template with one small script,
// embedded with the CSS into the binary: no build step, nothing fetched
// from anywhere at run time. The script fetches the page's live part every
// couple of seconds and swaps it in place, so that an open page follows a
// roll-out without reloading; every page says when its data was read and
// says plainly when it is stale or a source could not be read. The fleet is
// read once for every viewer, at most every couple of seconds (longer for a
// fleet whose read takes longer), and only while someone looks.
package fleetui

import (
	"compress/gzip"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/secret"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Defaults of Options.
const (
	// DefaultInterval is how old the fleet's snapshot may get before a
	// page that asks has it read again, and how often an open page asks:
	// about as often as a push moves, as `starter status --watch`.
	DefaultInterval = 2 * time.Second
	// DefaultWait is how long a page waits for a read in flight before it
	// shows the snapshot it has.
	DefaultWait = 1500 * time.Millisecond
)

// cookieName holds the token in a browser that gave it once as ?token=.
const cookieName = "meshroll_fleet_token"

// Options configures New.
type Options struct {
	// Source is where the fleet is read.
	Source Source
	// Config is the mesh config the worker runs: its machines, tiers and
	// modules, its namespace, its Web UI's URL and its windows. The
	// worker's is live (config.Live): each read and page takes the config
	// in force then.
	Config config.Source
	// Token, when set, is asked of every request: as a bearer token, or
	// once as ?token= (then kept in a cookie).
	Token secret.String
	// Log receives the page's own log lines.
	Log zerolog.Logger
	// Interval is DefaultInterval unless set; Wait DefaultWait.
	Interval, Wait time.Duration
	// Clock is time.Now unless set (tests).
	Clock func() time.Time
}

// Server serves the fleet page.
type Server struct {
	o     Options
	cache *cache
	mux   *http.ServeMux
	pages map[string]*template.Template
}

// New builds the page's handler.
func New(o Options) (*Server, error) {
	if o.Source == nil || o.Config == nil {
		return nil, errors.New("fleet page: a source and a mesh config are needed")
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	s := &Server{o: o, mux: http.NewServeMux(), pages: map[string]*template.Template{}}
	s.cache = &cache{src: o.Source, mesh: o.Config, interval: o.Interval, wait: o.Wait, clock: o.Clock, log: o.Log}
	for _, page := range []string{"matrix", "plans", "machine", "message"} {
		t, err := template.New(page).Funcs(s.funcs()).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("fleet page templates: %w", err)
		}
		s.pages[page] = t
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", s.matrix)
	s.mux.HandleFunc("GET /plans", s.plans)
	s.mux.HandleFunc("GET /machines/{name}", s.machine)
	s.mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		s.message(w, r, http.StatusNotFound, "Not here", "There is no such page. The fleet page has the matrix (/), the plans in flight (/plans) and a page per machine (/machines/NAME).")
	})
	return s, nil
}

// ServeHTTP checks the token, sets the headers every answer carries and
// serves the page asked for.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, CodecPath+"/") {
		s.codec(w, r)
		return
	}
	h := w.Header()
	// Everything the page loads is its own: the CSS and the script.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "the fleet page is read-only: only GET", http.StatusMethodNotAllowed)
		return
	}
	if !s.authorized(w, r) {
		return
	}
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") && !strings.HasPrefix(r.URL.Path, "/static/") {
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		gz := gzip.NewWriter(w)
		defer func() { _ = gz.Close() }()
		w = gzipWriter{ResponseWriter: w, w: gz}
	}
	s.mux.ServeHTTP(w, r)
}

// gzipWriter compresses a page, which repeats itself a great deal (a row a
// machine).
type gzipWriter struct {
	http.ResponseWriter
	w io.Writer
}

func (g gzipWriter) Write(p []byte) (int, error) { return g.w.Write(p) }

// authorized lets a request through when no token is set, or when it
// carries the token: as "Authorization: Bearer", as the cookie, or as
// ?token=, which sets the cookie and sends the browser to the same page
// without it (so that the token does not stay in its history or address
// bar). Otherwise it answers 401 and returns false.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.carriesToken(r) {
		return true
	}
	q := r.URL.Query()
	if tok := q.Get("token"); s.matches(tok) {
		http.SetCookie(w, &http.Cookie{
			Name: cookieName, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
			Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
		})
		q.Del("token")
		u := *r.URL
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return false
	}
	s.o.Log.Debug().Str("path", r.URL.Path).Str("remote", r.RemoteAddr).Msg("fleet page: request without the token refused")
	w.Header().Set("WWW-Authenticate", `Bearer realm="meshroll fleet page"`)
	s.message(w, r, http.StatusUnauthorized, "Token needed",
		"This fleet page asks for its token (worker.ui_token or worker.ui_token_file on the worker). Open it once as /?token=TOKEN, or send it as Authorization: Bearer TOKEN.")
	return false
}

// carriesToken is whether r may be answered without asking: no token is
// set, or r carries it as "Authorization: Bearer" or as the cookie.
func (s *Server) carriesToken(r *http.Request) bool {
	if s.o.Token.Reveal() == "" {
		return true
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.matches(tok) {
		return true
	}
	c, err := r.Cookie(cookieName)
	return err == nil && s.matches(c.Value)
}

// matches is whether got is the token, compared in constant time.
func (s *Server) matches(got string) bool {
	want := s.o.Token.Reveal()
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// page is what every page's template gets.
type page struct {
	Title string
	// Nav is which of the top links is this page.
	Nav string
	// LoadID is new on every full render and never in a live update, so
	// that a test can tell an update in place from a reload.
	LoadID   string
	Every    int64
	Fresh    freshness
	Legend   []legendEntry
	Body     any
	Fragment bool
}

// snapshot gets the fleet for a page, answering 503 (and false) when the
// first read has not ended before the request did.
func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) (*Snapshot, time.Time, bool) {
	snap, since := s.cache.get(r.Context())
	if snap == nil {
		s.message(w, r, http.StatusServiceUnavailable, "Reading the fleet",
			"The fleet is being read for the first time; this page will have it in a moment. Reload.")
		return nil, time.Time{}, false
	}
	return snap, since, true
}

// render executes a page, whole or (?fragment=1) only its live part.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.Fragment = r.URL.Query().Get("fragment") == "1"
	p.Every = s.o.Interval.Milliseconds()
	p.Legend = legend
	if !p.Fragment {
		p.LoadID = loadID()
	}
	tmpl := "page"
	if p.Fragment {
		tmpl = "live"
	}
	var b strings.Builder
	if err := s.pages[name].ExecuteTemplate(&b, tmpl, p); err != nil {
		s.o.Log.Error().Err(err).Str("page", name).Msg("fleet page: render failed")
		http.Error(w, "the page could not be rendered: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, b.String())
}

// message is a page with a title and a sentence, for what is not a page of
// the fleet.
func (s *Server) message(w http.ResponseWriter, r *http.Request, status int, title, text string) {
	s.render(w, r, status, "message", page{Title: title, Body: text})
}

func loadID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// funcs are the templates' helpers.
func (s *Server) funcs() template.FuncMap {
	return template.FuncMap{
		"utc": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		},
		"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
		"ms":      func(t time.Time) int64 { return t.UnixMilli() },
		"dur":     roundDuration,
		"ago":     func(d time.Duration) string { return roundDuration(d) + " ago" },
		"every":   func(ms int64) string { return roundDuration(time.Duration(ms) * time.Millisecond) },
		"machineURL": func(name string) string {
			return "/machines/" + url.PathEscape(name)
		},
		"shortCommit": mesh.ShortCommit,
		"shortDigest": mesh.ShortDigest,
		"inList":      func(s string, list []string) bool { return slices.Contains(list, s) },
		"whyDepth":    func() int { return whyDepth },
		"logLines":    func() int { return logLines },
	}
}

// roundDuration is a duration as a person reads it: 850ms, 3.2s, 2m5s.
func roundDuration(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
