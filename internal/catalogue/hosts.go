package catalogue

import (
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// HostState is one host's part of the fleet's picture: the newest report a
// watcher heard from it, when, and what went wrong since. The worker's
// watcher (package fleetwatch) keeps it current by long-polling every host,
// so that `starter status`, `machine list` and the fleet page read every
// host's state in one read of the catalogue instead of one call per host.
// It lives in the catalogue because every worker replica and every reader
// must see the same picture, and the catalogue is already the store they
// share.
type HostState struct {
	Machine string `json:"machine"`
	// Report is the newest report heard; nil when the host has not been
	// heard yet (only its error is known).
	Report *mesh.Report `json:"report,omitempty"`
	// Revision is the host's revision of Report (see host.ReportWaiter);
	// 0 for a host that does not long-poll.
	Revision uint64 `json:"revision"`
	// ChangedAt is when Report was recorded.
	ChangedAt time.Time `json:"changed_at"`
	// HeardAt is the last time any watcher heard the host answer; zero
	// when it never has.
	HeardAt time.Time `json:"heard_at"`
	// Error is the last error asking the host, "" when it answered since;
	// ErrorSince is when it began failing and ErrorAt when it last did.
	Error      string     `json:"error,omitempty"`
	ErrorSince *time.Time `json:"error_since,omitempty"`
	ErrorAt    *time.Time `json:"error_at,omitempty"`
}
