package enroll

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// records is a hand-written Records: enrollments by machine, the asks
// recorded, and errors to give.
type records struct {
	byMachine map[string]meshapi.Enrollment
	asked     []meshapi.EnrollAsk
	getErr    error
	askErr    error
}

func (r *records) Get(_ context.Context, machine string) (meshapi.Enrollment, bool, error) {
	e, ok := r.byMachine[machine]
	return e, ok, r.getErr
}

func (r *records) Ask(_ context.Context, ask meshapi.EnrollAsk) error {
	if r.askErr != nil {
		return r.askErr
	}
	r.asked = append(r.asked, ask)
	return nil
}

// Each answer of the endpoint, with what it records: only an ask that is
// new, or pending with another host or labels, is recorded; a refused one
// never is.
func TestHandler(t *testing.T) {
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	ask := `{"machine":"edge-9","host":"http://10.0.0.9:7400","labels":{"site":"fra1"}}`
	asked := meshapi.EnrollAsk{Machine: "edge-9", Host: "http://10.0.0.9:7400", Labels: map[string]string{"site": "fra1"}, At: at}
	decided := &meshapi.EnrollDecision{By: "alice", Reason: "racked"}
	for _, tc := range []struct {
		name     string
		method   string
		token    string
		body     string
		known    map[string]meshapi.Enrollment
		getErr   error
		status   int
		state    string
		message  string
		recorded bool
	}{
		{name: "a new machine", body: ask, status: 202, state: StatePending, recorded: true,
			message: "machine edge-9 is pending: nothing is pushed to it until an operator admits it with `starter machine approve edge-9`"},
		{name: "pending, asking again the same", body: ask, known: map[string]meshapi.Enrollment{"edge-9": {Ask: asked, State: meshapi.EnrollPending}},
			status: 202, state: StatePending},
		{name: "pending, with new labels", body: strings.Replace(ask, "fra1", "ams2", 1),
			known: map[string]meshapi.Enrollment{"edge-9": {Ask: asked, State: meshapi.EnrollPending}}, status: 202, state: StatePending, recorded: true},
		{name: "admitted", body: ask, known: map[string]meshapi.Enrollment{"edge-9": {Ask: asked, State: meshapi.EnrollAdmitted, Decided: decided}},
			status: 200, state: StateAdmitted, message: "machine edge-9 is admitted by alice (racked): the worker brings it to the newest healthy builds of its modules"},
		{name: "admitted, asking from another host", body: strings.Replace(ask, "10.0.0.9", "10.6.6.6", 1),
			known:  map[string]meshapi.Enrollment{"edge-9": {Ask: asked, State: meshapi.EnrollAdmitted, Decided: decided}},
			status: 409, message: "refused: machine edge-9 was admitted with host http://10.0.0.9:7400, not http://10.6.6.6:7400; to move it, an operator turns it away (`starter machine deny edge-9`) and admits its new ask"},
		{name: "denied", body: ask, known: map[string]meshapi.Enrollment{"edge-9": {Ask: asked, State: meshapi.EnrollDenied, Decided: decided}},
			status: 403, state: StateDenied, message: "machine edge-9 was turned away by alice (racked); it gets nothing unless an operator admits it with `starter machine approve edge-9`"},
		{name: "no token", token: "-", body: ask, status: 401},
		{name: "wrong token", token: "Bearer guess", body: ask, status: 401},
		{name: "a GET", method: http.MethodGet, status: 405},
		{name: "not JSON", body: "machine=edge-9", status: 400},
		{name: "a bad name", body: `{"machine":"Edge 9","host":"http://10.0.0.9:7400"}`, status: 400},
		{name: "a host that is no URL", body: `{"machine":"edge-9","host":"10.0.0.9:7400"}`, status: 400,
			message: `refused: host "10.0.0.9:7400" is not an http(s) URL; the agent's --advertise says where the worker reaches its host API`},
		{name: "a bad label", body: `{"machine":"edge-9","host":"http://10.0.0.9:7400","labels":{"site":"fra 1"}}`, status: 400},
		{name: "a name mesh.yaml gives", body: `{"machine":"edge-1","host":"http://10.0.0.9:7400"}`, status: 409,
			message: "refused: mesh.yaml names machine edge-1 already (host http://10.0.0.1:7400); it needs no enrollment, or this agent needs another --machine"},
		{name: "too big", body: `{"machine":"` + strings.Repeat("x", maxAsk) + `"}`, status: 413},
		{name: "Temporal unreachable", body: ask, getErr: errors.New("connection refused"), status: 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := &records{byMachine: tc.known, getErr: tc.getErr}
			h, err := NewHandler(Options{Token: "enroll-s3cret", Records: recs, Log: zerolog.Nop(), Now: func() time.Time { return at },
				Named: func(m string) (string, bool) { return "http://10.0.0.1:7400", m == "edge-1" }})
			require.NoError(t, err)
			req := httptest.NewRequest(cmp.Or(tc.method, http.MethodPost), Path, strings.NewReader(tc.body))
			switch tc.token {
			case "":
				req.Header.Set("Authorization", "Bearer enroll-s3cret")
			case "-":
			default:
				req.Header.Set("Authorization", tc.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, tc.status, rec.Code)
			var a Answer
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &a), "every answer is JSON: %s", rec.Body)
			assert.Equal(t, tc.state, a.State)
			assert.NotEmpty(t, a.Message)
			if tc.message != "" {
				assert.Equal(t, tc.message, a.Message)
			}
			assert.NotContains(t, a.Message, "enroll-s3cret")
			if tc.recorded {
				require.Len(t, recs.asked, 1)
				assert.Equal(t, "edge-9", recs.asked[0].Machine)
				assert.Equal(t, at, recs.asked[0].At)
			} else {
				assert.Empty(t, recs.asked, "nothing recorded")
			}
		})
	}
}

// An endpoint without a token is never made.
func TestHandlerNeedsAToken(t *testing.T) {
	_, err := NewHandler(Options{Records: &records{}})
	require.ErrorContains(t, err, "the enrollment endpoint needs a token")
}
