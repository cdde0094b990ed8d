// Package host is meshroll's side of the host agent's HTTP API: the wire
// contract, the rules every agent enforces, the handler that serves them and
// the client the worker's activities call. Keeping all four in one package is
// what lets the real agent and the in-process test host (package hosttest)
// behave identically: both serve NewHandler over a Ledger, so a rule changes
// in one place.
//
// The machine workflow is the only writer to a host. It reads the report,
// checks that nothing is downgraded, sends a numbered declaration and polls
// the report (long-polled, where the host can) until the declared
// containers count healthy.
//
// # Wire API
//
// All bodies are JSON. Request bodies are limited to MaxBodyBytes and decoded
// with unknown fields refused. When the agent has a token, every request but
// the health check must carry "Authorization: Bearer <token>".
//
//	GET  /v1/report        200 mesh.Report, its revision in the header
//	                       X-Meshroll-Report-Revision (an agent that
//	                       long-polls)
//	     ?after=REV&wait=D long poll: answered once the revision is not
//	                       REV, at once if it is not now, else when it
//	                       changes or D (a Go duration, at most
//	                       MaxReportWait) has passed; no parameters: at once
//	POST /v1/declarations  body mesh.Declaration
//	                       200 ApplyResult once the declaration is durably
//	                       recorded; the host then starts applying it and
//	                       the caller polls the report until it runs.
//	GET  /v1/healthz       200
//
// Refusals carry {"error":{"code":..., "message":..., "last_seq":N}}, where
// last_seq is the last sequence the host applied:
//
//	409 sequence      Seq at or below the last applied and not an exact
//	                  repeat of the last applied declaration
//	409 downgrade     a container's generation is below the host's floor for
//	                  its module and Force is not set
//	400 unpinned      a digest is not sha256:<hex>, or an image carries a tag
//	                  or digest of its own
//	400 invalid       malformed body, unknown fields, another machine's
//	                  declaration, bad or duplicate module names, a health
//	                  check no agent could run (two probes, a bad port or
//	                  path, an empty command, a negative time); an unknown
//	                  or repeated query parameter
//	401 unauthorized  token configured and the bearer token does not match
//
// An exact repeat of the last applied declaration (same Seq, same content)
// answers 200 with Repeat set and changes nothing, so a push whose answer
// was lost can simply be sent again. 5xx answers mean the host cannot serve
// now; clients treat them like an unreachable host.
package host
