package devlaunch

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/devlaunch/devlaunchtest"
	"github.com/meshroll/meshroll/internal/syncbuf"
)

var headless = []string{"--namespace", "default", "--headless", "--log-level", "warn"}

// takenAddr holds a loopback port until the test ends and returns its
// address, which a server then cannot bind.
func takenAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().String()
}

// The port picked for a server can be taken before the CLI binds it
// (another test's server took it). The CLI then exits; Launch picks
// another port and starts again, at once, rather than failing after the
// client's connect timeout.
func TestStartsAgainWhenThePickedPortWasTaken(t *testing.T) {
	path := devlaunchtest.TemporalCLI(t, "devlaunch")
	taken := takenAddr(t)

	var mu sync.Mutex
	var handed []string
	PickHostPort = func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(handed) == 0 {
			handed = append(handed, taken)
			return taken, nil
		}
		p, err := FreeHostPort()
		handed = append(handed, p)
		return p, err
	}
	t.Cleanup(func() { PickHostPort = FreeHostPort })

	var out syncbuf.Buffer
	p, c, err := Launch(context.Background(), Options{CLI: path, Args: headless, Out: &out})
	require.NoError(t, err, out.String())
	t.Cleanup(func() {
		c.Close()
		assert.NoError(t, p.Stop())
	})
	require.Len(t, handed, 2, "one taken port, then one free")
	assert.Equal(t, handed[1], p.HostPort())
	assert.Contains(t, out.String(), "address already in use")
	assert.Contains(t, out.String(), "starting again on another port")
	assert.Contains(t, out.String(), "starting "+path+" server start-dev on "+handed[1])
	assert.Equal(t, 1, strings.Count(out.String(), "server ready"))
}

// An address the caller named is not changed: a server that cannot bind
// it fails the launch as soon as it exits, not after the connect timeout.
func TestNamedAddressTakenFails(t *testing.T) {
	path := devlaunchtest.TemporalCLI(t, "devlaunch")
	taken := takenAddr(t)
	var out syncbuf.Buffer
	_, _, err := Launch(context.Background(), Options{CLI: path, HostPort: taken, Args: headless, Out: &out, Timeout: 10 * time.Minute})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrAddressInUse)
	assert.Contains(t, err.Error(), "exited before answering", "given up when the server exited, not at the timeout")
	assert.Equal(t, 1, strings.Count(out.String(), "server start-dev on"), "a named address is not swapped for another")
}
