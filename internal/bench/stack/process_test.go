package stack

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// busy is a shell loop that burns CPU until killed or done.
func busy(loops string) *exec.Cmd {
	return exec.Command("sh", "-c", "i=0; while [ $i -lt "+loops+" ]; do i=$((i+1)); done")
}

// ReadTreeCPU counts a running child's CPU and, once reaped, what it spent:
// the store's backends are children of its postmaster, some short-lived.
func TestReadTreeCPUCountsChildren(t *testing.T) {
	self := os.Getpid()

	running := busy("1000000000")
	require.NoError(t, running.Start())
	t.Cleanup(func() { _ = running.Process.Kill(); _ = running.Wait() })
	var child Usage
	for deadline := time.Now().Add(time.Minute); child.CPU == 0; {
		require.True(t, time.Now().Before(deadline), "the busy child showed no CPU in a minute")
		u, err := ReadUsage(running.Process.Pid)
		require.NoError(t, err)
		child = u
	}
	own, err := ReadUsage(self)
	require.NoError(t, err)
	tree, err := ReadTreeCPU(self)
	require.NoError(t, err)
	require.GreaterOrEqual(t, tree, own.CPU+child.CPU, "a running child's CPU is counted")
	_ = running.Process.Kill()
	_ = running.Wait()

	before, err := ReadTreeCPU(self)
	require.NoError(t, err)
	done := busy("200000")
	require.NoError(t, done.Run())
	spent := done.ProcessState.UserTime() + done.ProcessState.SystemTime()
	after, err := ReadTreeCPU(self)
	require.NoError(t, err)
	// /proc counts in 10 ms ticks, rusage exactly.
	require.GreaterOrEqual(t, after-before, spent-20*time.Millisecond, "a reaped child's CPU is counted (it spent %v)", spent)
}
