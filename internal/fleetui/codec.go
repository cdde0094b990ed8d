package fleetui

import (
	"net/http"
	"net/url"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/payloads"
)

// CodecPath is where the fleet page's server decodes payloads for the
// Temporal Web UI (its codec endpoint: POST CodecPath/decode, and /encode
// for what the UI sends) and for `temporal workflow show --codec-endpoint`.
// meshroll stores large payloads compressed (package payloads); without it
// a person reads them in the Web UI as binary/zlib. Decoding changes
// nothing, so the page stays read-only; it asks for the page's token, as
// every page does.
const CodecPath = "/codec"

// maxCodecBody caps what one decode request may post: the Web UI sends an
// event's or a query's payloads, each under Temporal's 2 MB blob limit.
const maxCodecBody = 16 << 20

// codec serves CodecPath. The Web UI calls it from the browser, from the
// origin of temporal.ui_url: that origin alone gets the CORS headers that
// let it read the answer, with credentials, so that a browser that holds
// the page's cookie is let in. A preflight (OPTIONS) is answered without
// the token, which browsers never send with one.
func (s *Server) codec(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if origin := r.Header.Get("Origin"); fromWebUI(origin, s.o.Config.Current().Temporal.UIURL) {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
		h.Set("Access-Control-Max-Age", "600")
	}
	h.Add("Vary", "Origin")
	switch r.Method {
	case http.MethodOptions:
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPost:
	default:
		h.Set("Allow", "POST, OPTIONS")
		http.Error(w, "the codec endpoint takes POST "+CodecPath+"/decode or "+CodecPath+"/encode", http.StatusMethodNotAllowed)
		return
	}
	if !s.carriesToken(r) {
		h.Set("WWW-Authenticate", `Bearer realm="meshroll fleet page"`)
		http.Error(w, "the codec endpoint asks for the fleet page's token (worker.ui_token): send it as Authorization: Bearer TOKEN, or open the fleet page once as /?token=TOKEN in this browser", http.StatusUnauthorized)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxCodecBody)
	payloads.CodecHandler().ServeHTTP(w, r)
}

// fromWebUI is whether origin, a browser's Origin header, is the Web UI
// of uiURL (temporal.ui_url): its scheme, host and port; on loopback any
// name of it (127.0.0.1, localhost, [::1]), as a developer opens the dev
// stack's Web UI by either.
func fromWebUI(origin, uiURL string) bool {
	ui, err := url.Parse(uiURL)
	if err != nil || ui.Host == "" || origin == "" {
		return false
	}
	o, err := url.Parse(origin)
	if err != nil || o.Scheme != ui.Scheme || o.Port() != ui.Port() {
		return false
	}
	return o.Hostname() == ui.Hostname() || (config.Loopback(o.Hostname()) && config.Loopback(ui.Hostname()))
}
