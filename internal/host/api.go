package host

import (
	"fmt"
	"net/http"
	"time"
)

// Paths of the host API, shared by the handler and the client so that the two
// cannot drift apart.
const (
	PathReport       = "/v1/report"
	PathDeclarations = "/v1/declarations"
	PathHealthz      = "/v1/healthz"
)

// The report's long poll: GET PathReport?after=REVISION&wait=DURATION
// answers at once when the report's revision is no longer REVISION, and
// otherwise when it changes or DURATION (Go syntax: 30s, 1500ms) passes,
// whichever is first. Every answer of an agent that long-polls names its
// report's revision in HeaderReportRevision; a host without the header
// (an agent that does not long-poll, such as a fleet's own) answers at once
// and must be polled.
const (
	// HeaderReportRevision names the revision of the report in the
	// answer: an opaque number that changes whenever the report does
	// (except a probe that only repeats the last one's outcome), so that a
	// waiter passes it back as after= and is woken by the next change.
	HeaderReportRevision = "X-Meshroll-Report-Revision"
	// QueryAfter and QueryWait are the long poll's parameters.
	QueryAfter = "after"
	QueryWait  = "wait"
	// MaxReportWait caps wait=, so that no proxy or server timeout on the
	// way cuts a poll short; a longer wait is taken as this one.
	MaxReportWait = 60 * time.Second
)

// MaxBodyBytes bounds every request and response body, so a confused or
// hostile peer cannot make either side buffer without limit.
const MaxBodyBytes = 1 << 20

// Refusal codes. Callers branch on these, never on messages.
const (
	// CodeSequence: the Seq is at or below the last applied and is not an
	// exact repeat of it. The sender is stale; LastSeq tells it where the
	// host is.
	CodeSequence = "sequence"
	// CodeDowngrade: a container's generation is below the host's floor for
	// its module and Force is not set.
	CodeDowngrade = "downgrade"
	// CodeUnpinned: a container is not pinned by a sha256 digest.
	CodeUnpinned = "unpinned"
	// CodeInvalid: the request is malformed or addressed to another machine;
	// retrying it unchanged can never succeed.
	CodeInvalid = "invalid"
	// CodeUnauthorized: the bearer token is missing or wrong.
	CodeUnauthorized = "unauthorized"
	// CodeInternal: the agent failed on its own side; transient as far as
	// the caller knows.
	CodeInternal = "internal"
	// CodeNotFound: what was asked about does not exist on this host (the
	// logs of a module it does not run); the message names it.
	CodeNotFound = "not_found"
	// CodeUnsupported: this host cannot do what was asked at all (logs
	// from a runtime that keeps none); asking again cannot help.
	CodeUnsupported = "unsupported"
)

// ApplyResult answers an accepted declaration. Repeat tells a retrying caller
// that its earlier attempt had already landed and nothing new was applied.
type ApplyResult struct {
	Seq    uint64 `json:"seq"`
	Repeat bool   `json:"repeat"`
}

// Refusal is the agent's reason for not doing what was asked, exactly as the
// wire carries it. The rules return it so that the handler can put it on the
// wire unchanged and the client can rebuild it on the other side.
type Refusal struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// LastSeq is the last sequence the host applied when it refused.
	LastSeq uint64 `json:"last_seq"`
}

// Error gives code and message, so a refusal reads well in the agent's log.
func (r *Refusal) Error() string {
	return fmt.Sprintf("%s: %s", r.Code, r.Message)
}

// Status is the HTTP status a refusal travels with: the wire contract maps
// codes to statuses in exactly one place.
func (r *Refusal) Status() int {
	switch r.Code {
	case CodeInvalid, CodeUnpinned:
		// A digest that is not one is bad input, like a malformed body.
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeInternal:
		return http.StatusInternalServerError
	case CodeNotFound:
		return http.StatusNotFound
	case CodeUnsupported:
		return http.StatusNotImplemented
	default:
		return http.StatusConflict
	}
}

// errorBody is the envelope of every non-200 answer.
type errorBody struct {
	Error Refusal `json:"error"`
}
