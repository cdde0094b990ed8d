package host

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/meshroll/meshroll/internal/mesh"
)

// NewHandler serves a host's API over HTTP. The agent implements Client in
// process (Report and Apply behind a Ledger) and the handler is only the wire:
// authentication, body limits, strict decoding and the mapping of a *Refusal
// to its status. The real agent and hosttest share it so that the two cannot
// answer differently. An empty token turns authentication off; the health
// check never needs it, so probes need no secret.
func NewHandler(agent Client, token string) http.Handler {
	h := &handler{agent: agent}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		h.tokenSum = &sum
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathHealthz, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	mux.HandleFunc("GET "+PathReport, h.authed(h.report))
	mux.HandleFunc("POST "+PathDeclarations, h.authed(h.apply))
	return mux
}

type handler struct {
	agent    Client
	tokenSum *[sha256.Size]byte
}

// authed checks the bearer token (see RequireToken).
func (h *handler) authed(next http.HandlerFunc) http.HandlerFunc {
	if h.tokenSum == nil {
		return next
	}
	return requireSum(*h.tokenSum, next).ServeHTTP
}

// RequireToken wraps next so that it answers only requests carrying
// "Authorization: Bearer <token>", and 401 with nothing else otherwise; an
// empty token turns the check off. It is how every path of the host API but
// the health check is guarded, including agents' own additions (the
// journal). Both sides are hashed before the constant-time compare so that
// not even the token's length leaks.
func RequireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	return requireSum(sha256.Sum256([]byte(token)), next)
}

func requireSum(want [sha256.Size]byte, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="meshroll-host"`)
			WriteRefusal(w, &Refusal{Code: CodeUnauthorized, Message: "missing or wrong bearer token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (h *handler) report(w http.ResponseWriter, r *http.Request) {
	rep, err := h.agent.Report(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	if rep.Containers == nil {
		rep.Containers = []mesh.RunningContainer{}
	}
	WriteJSON(w, http.StatusOK, rep)
}

func (h *handler) apply(w http.ResponseWriter, r *http.Request) {
	var d mesh.Declaration
	if err := decodeStrict(w, r, &d); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			WriteJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: Refusal{
				Code: CodeInvalid, Message: fmt.Sprintf("body exceeds %d bytes", tooBig.Limit),
			}})
			return
		}
		WriteRefusal(w, &Refusal{Code: CodeInvalid, Message: err.Error()})
		return
	}
	res, err := h.agent.Apply(r.Context(), d)
	if err != nil {
		writeError(w, err)
		return
	}
	WriteJSON(w, http.StatusOK, res)
}

// decodeStrict decodes exactly one JSON value with unknown fields refused:
// a field the agent does not know is a field it would silently ignore.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode declaration: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return errors.New("decode declaration: trailing data after the JSON value")
	}
	return nil
}

// writeError answers a *Refusal with its status and anything else with 500,
// which clients treat as transient.
func writeError(w http.ResponseWriter, err error) {
	var r *Refusal
	if errors.As(err, &r) {
		WriteRefusal(w, r)
		return
	}
	WriteRefusal(w, &Refusal{Code: CodeInternal, Message: err.Error()})
}

// WriteRefusal answers a refusal with its status and the host API's error
// envelope, {"error": {...}}, so that agents' own endpoints answer as the
// contract does.
func WriteRefusal(w http.ResponseWriter, r *Refusal) {
	WriteJSON(w, r.Status(), errorBody{Error: *r})
}

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
