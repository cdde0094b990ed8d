package meshapi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A target's trouble names its event once: in brackets when the error does
// not, not again when it does.
func TestNotifyTroubleWords(t *testing.T) {
	since := time.Date(2026, 12, 5, 10, 4, 5, 0, time.UTC)
	key := "plan/host/c#1-plan_started"
	for _, tc := range []struct {
		err, want string
	}{
		{"receiver answered 503", "notify target team failing since 10:04:05 UTC (" + key + "): receiver answered 503"},
		{"post event " + key + ": connection refused", "notify target team failing since 10:04:05 UTC: post event " + key + ": connection refused"},
	} {
		tr := NotifyTrouble{Target: "team", Event: key, Outcome: NotifyFailing, Since: since, Error: tc.err}
		assert.Equal(t, tc.want, tr.Words())
	}
}
