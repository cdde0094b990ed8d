// Package liveness serves the liveness and readiness probes that the worker
// and the host agent share, so that an orchestrator (Kubernetes, compose,
// systemd) asks both the same way: /livez says the process serves at all
// and should not be restarted; /readyz says it can do its work now (the
// worker is connected to Temporal and polling, the agent's journal is open).
// Both are unauthenticated and read-only, and their answers carry no
// secrets: a probe needs no token. They speak of the process itself, not of
// the health of the containers it deploys.
package liveness

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Paths of the probes.
const (
	PathLive  = "/livez"
	PathReady = "/readyz"
)

// ReadyTimeout bounds one readiness check, so that a probe whose check
// hangs (a Temporal frontend that does not answer) is answered "not ready"
// before the prober gives up on it.
const ReadyTimeout = 3 * time.Second

// Check reports why the process is not ready, or nil when it is.
type Check func(ctx context.Context) error

// Status is the probes' JSON answer.
type Status struct {
	OK bool `json:"ok"`
	// Reason says why a process is not ready.
	Reason string `json:"reason,omitempty"`
}

// Mount adds the two probes to mux. ready may be nil (always ready).
func Mount(mux *http.ServeMux, ready Check) {
	mux.HandleFunc("GET "+PathLive, func(w http.ResponseWriter, _ *http.Request) {
		write(w, http.StatusOK, Status{OK: true})
	})
	mux.HandleFunc("GET "+PathReady, func(w http.ResponseWriter, r *http.Request) {
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
			defer cancel()
			if err := ready(ctx); err != nil {
				write(w, http.StatusServiceUnavailable, Status{Reason: err.Error()})
				return
			}
		}
		write(w, http.StatusOK, Status{OK: true})
	})
}

func write(w http.ResponseWriter, code int, s Status) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(s)
}
