package enroll

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/secret"
	"github.com/meshroll/meshroll/internal/selector"
)

// maxAsk caps an ask's body: a name, a URL and a few labels.
const maxAsk = 64 << 10

// Records is where the handler reads and records enrollments: the
// machines' Enrollment workflows (Temporal), or a fake in a test.
type Records interface {
	// Get is machine's enrollment; ok is false when it has none.
	Get(ctx context.Context, machine string) (e meshapi.Enrollment, ok bool, err error)
	// Ask records an ask: it starts the machine's enrollment, pending, or
	// gives a pending one its new host and labels.
	Ask(ctx context.Context, ask meshapi.EnrollAsk) error
}

// Options are the handler's settings.
type Options struct {
	// Token is the enrollment token every agent presents: whoever has it
	// can ask, and an operator still decides.
	Token secret.String
	// Records keeps the enrollments.
	Records Records
	// Named says whether mesh.yaml names machine already, with the host it
	// gives it: such a machine needs no enrollment, and an ask under its
	// name is refused rather than let a second host answer for it.
	Named func(machine string) (host string, ok bool)
	Log   zerolog.Logger
	// Now stamps asks; time.Now when nil.
	Now func() time.Time
}

// Handler is the worker's enrollment endpoint (Path): it checks the token
// and the ask, and answers what the machine's enrollment says, recording
// the ask when it is new or changed. It never admits anyone itself.
type Handler struct{ o Options }

// NewHandler refuses to make an endpoint without a token: whoever reaches
// it could fill the pending list.
func NewHandler(o Options) (*Handler, error) {
	if o.Token == "" {
		return nil, errors.New("the enrollment endpoint needs a token: agents present it, and without one anyone who reaches it could ask")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Handler{o: o}, nil
}

// reply is an answer with its HTTP status.
type reply struct {
	status int
	Answer
}

func replyf(status int, state, format string, args ...any) reply {
	return reply{status: status, Answer: Answer{State: state, Message: fmt.Sprintf(format, args...)}}
}

// ServeHTTP answers one ask in JSON and logs one line for it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a, machine := h.serve(r)
	if a.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", http.MethodPost)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(a.status)
	_ = json.NewEncoder(w).Encode(a.Answer)
	l := h.o.Log.Info()
	if a.status >= 400 {
		l = h.o.Log.Warn()
	}
	l.Str("remote", r.RemoteAddr).Str("machine", machine).Int("status", a.status).Str("state", a.State).Msg(a.Message)
}

// serve decides the answer to an ask; machine is its machine once read.
func (h *Handler) serve(r *http.Request) (a reply, machine string) {
	if r.URL.Path != Path {
		return replyf(http.StatusNotFound, "", "no enrollment endpoint at %s; agents ask at %s", r.URL.Path, Path), ""
	}
	if r.Method != http.MethodPost {
		return replyf(http.StatusMethodNotAllowed, "", "%s is not how an agent asks; POST its ask as JSON", r.Method), ""
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(h.o.Token)) != 1 {
		return replyf(http.StatusUnauthorized, "", "refused: the ask does not carry the mesh's enrollment token; start the agent with --enroll-token-file naming the token the worker's worker.enroll_token gives"), ""
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxAsk))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return replyf(http.StatusRequestEntityTooLarge, "", "refused: an ask is at most %d bytes", maxAsk), ""
	}
	if err != nil {
		return replyf(http.StatusBadRequest, "", "refused: reading the ask: %v", err), ""
	}
	var ask Ask
	if err := json.Unmarshal(body, &ask); err != nil {
		return replyf(http.StatusBadRequest, "", "refused: the ask is not JSON of {machine, host, labels}: %v", err), ""
	}
	if msg := check(ask); msg != "" {
		return replyf(http.StatusBadRequest, "", "refused: %s", msg), ask.Machine
	}
	if host, ok := h.o.Named(ask.Machine); ok {
		return replyf(http.StatusConflict, "", "refused: mesh.yaml names machine %s already (host %s); it needs no enrollment, or this agent needs another --machine", ask.Machine, host), ask.Machine
	}
	return h.decide(r.Context(), ask), ask.Machine
}

// check is what is wrong with an ask, or "".
func check(a Ask) string {
	if err := mesh.ValidName("machine", a.Machine); err != nil {
		return err.Error()
	}
	u, err := url.Parse(a.Host)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("host %q is not an http(s) URL; the agent's --advertise says where the worker reaches its host API", a.Host)
	}
	for _, k := range slices.Sorted(maps.Keys(a.Labels)) {
		msg := selector.CheckKey(k)
		if msg == "" {
			msg = selector.CheckValue(a.Labels[k])
		}
		if msg != "" {
			return fmt.Sprintf("label %s: %s", k, msg)
		}
	}
	return ""
}

// decide answers with the machine's enrollment, recording the ask when
// the enrollment is new or pending with another host or labels.
func (h *Handler) decide(ctx context.Context, a Ask) reply {
	e, ok, err := h.o.Records.Get(ctx, a.Machine)
	if err != nil {
		return replyf(http.StatusServiceUnavailable, "", "the worker could not read machine %s's enrollment (%v); the agent asks again", a.Machine, err)
	}
	ask := meshapi.EnrollAsk{Machine: a.Machine, Host: a.Host, Labels: a.Labels, At: h.o.Now().UTC()}
	pending := replyf(http.StatusAccepted, StatePending, "machine %s is pending: nothing is pushed to it until an operator admits it with `starter machine approve %s`", a.Machine, a.Machine)
	switch {
	case !ok || (e.State == meshapi.EnrollPending && (e.Ask.Host != a.Host || !maps.Equal(e.Ask.Labels, a.Labels))):
		if err := h.o.Records.Ask(ctx, ask); err != nil {
			return replyf(http.StatusServiceUnavailable, "", "the worker could not record machine %s's ask (%v); the agent asks again", a.Machine, err)
		}
		return pending
	case e.State == meshapi.EnrollPending:
		return pending
	case e.State == meshapi.EnrollAdmitted && e.Ask.Host != a.Host:
		return replyf(http.StatusConflict, "", "refused: machine %s was admitted with host %s, not %s; to move it, an operator turns it away (`starter machine deny %s`) and admits its new ask", a.Machine, e.Ask.Host, a.Host, a.Machine)
	case e.State == meshapi.EnrollAdmitted:
		return replyf(http.StatusOK, StateAdmitted, "machine %s is admitted%s: the worker brings it to the newest healthy builds of its modules", a.Machine, decidedBy(e))
	default:
		return replyf(http.StatusForbidden, StateDenied, "machine %s was turned away%s; it gets nothing unless an operator admits it with `starter machine approve %s`", a.Machine, decidedBy(e), a.Machine)
	}
}

// decidedBy says who decided e, and why, for an answer.
func decidedBy(e meshapi.Enrollment) string {
	if e.Decided == nil {
		return ""
	}
	s := " by " + e.Decided.By
	if e.Decided.Reason != "" {
		s += " (" + e.Decided.Reason + ")"
	}
	return s
}
