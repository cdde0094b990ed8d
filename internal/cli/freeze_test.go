package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
)

// The freeze levers and merge's override refuse what they can before
// connecting: an unknown module or machine, a freeze without a reason, an
// override without one, --reason without --override-freeze.
func TestFreezeUsageNeverDials(t *testing.T) {
	cfg := writeConfig(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"freeze", "--module", "nope", "--reason", "x"}, `unknown module "nope" (known: host, mesh-controller)`},
		{[]string{"freeze", "--machine", "edge-9", "--reason", "x"}, `unknown machine "edge-9" (known: control-node, edge-1)`},
		{[]string{"freeze", "--module", "host"}, "a freeze needs reason"},
		{[]string{"freeze", "--reason", " "}, "a freeze needs reason"},
		{[]string{"freeze", "list", "extra"}, `unknown command "extra"`},
		{[]string{"unfreeze", "--module", "nope"}, `unknown module "nope"`},
		{[]string{"unfreeze", "--machine", "edge-9"}, `unknown machine "edge-9"`},
		{[]string{"merge", "--module", "host", "--commit", commit, "--override-freeze"}, "an override of a freeze needs reason"},
		{[]string{"merge", "--module", "host", "--commit", commit, "--reason", "x"}, "--reason and --by go with --override-freeze"},
	} {
		r := run(t, append([]string{"--config", cfg}, tc.args...)...)
		require.Error(t, r.err, tc.args)
		assert.Contains(t, r.err.Error(), tc.want, tc.args)
		assert.NotContains(t, r.err.Error(), unreachable, "must refuse before dialing: %v", tc.args)
		assert.Equal(t, ExitUsage, ExitCode(r.err), tc.args)
	}
}

// A valid freeze gets as far as dialing (and fails there, with nothing
// listening): its checks passed.
func TestFreezeValidDials(t *testing.T) {
	cfg := writeConfig(t)
	for _, args := range [][]string{
		{"freeze", "--module", "host", "--machine", "edge-1", "--reason", "x"},
		{"unfreeze"},
		{"freeze", "list"},
	} {
		r := run(t, append([]string{"--config", cfg}, args...)...)
		require.Error(t, r.err, args)
		assert.Equal(t, ExitError, ExitCode(r.err), "%v: %v", args, r.err)
	}
}

func TestFreezeTable(t *testing.T) {
	var b bytes.Buffer
	at := time.Date(2026, 12, 3, 9, 30, 0, 0, time.UTC)
	require.NoError(t, writeFreezes(&b, []mesh.Freeze{
		{ID: 1, By: "alice", Reason: "release week", At: at},
		{ID: 2, Module: "host", Machine: "edge-1", By: "bob", Reason: "disk swap", At: at},
	}))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 3)
	assert.Regexp(t, `^ID\s+SCOPE\s+BY\s+SINCE\s+REASON$`, lines[0])
	assert.Regexp(t, `^1\s+the whole mesh\s+alice\s+2026-12-03 09:30 UTC\s+release week$`, lines[1])
	assert.Regexp(t, `^2\s+module host on machine edge-1\s+bob\s+.*disk swap$`, lines[2])
	b.Reset()
	require.NoError(t, writeFreezes(&b, nil))
	assert.Contains(t, b.String(), "(no active freezes)")
}

// A held plan's words name the hold once: "held: freeze by ...".
func TestWithReasonHeld(t *testing.T) {
	assert.Equal(t, "held: freeze by alice: release week", withReason("held", "held: freeze by alice: release week"))
	assert.Equal(t, "halted: tier 1 halted", withReason("halted", "tier 1 halted"))
	assert.Equal(t, "pushing", withReason("pushing", ""))
}
