package devserver

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartsAgainWhenThePickedPortWasTaken: the port picked for a server
// can be taken before the CLI binds it (another test's server took it).
// The CLI then exits; Start picks another port and starts again, at once,
// rather than failing the test after the client's connect timeout.
func TestStartsAgainWhenThePickedPortWasTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })

	var mu sync.Mutex
	var handed []string
	pickHostPort = func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(handed) == 0 {
			handed = append(handed, taken.Addr().String())
			return taken.Addr().String(), nil
		}
		p, err := freeHostPort()
		handed = append(handed, p)
		return p, err
	}
	t.Cleanup(func() { pickHostPort = freeHostPort })

	srv := Start(t, Options{})
	require.Len(t, handed, 2, "one taken port, then one free")
	assert.Equal(t, handed[1], srv.HostPort())
	assert.Contains(t, srv.Log(), "address already in use")
	assert.Contains(t, srv.Log(), "starting again on "+handed[1])
	assert.Equal(t, 1, strings.Count(srv.Log(), "server ready"))
}

// TestNamedAddressTakenFails: an address the test named is not
// changed; a server that cannot bind it fails the start as soon as it exits,
// naming the address, not after the connect timeout.
func TestNamedAddressTakenFails(t *testing.T) {
	if testing.Short() {
		t.Skip("devserver: Temporal dev server tests are skipped with -short")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	s := &Server{opts: Options{HostPort: taken.Addr().String(), Namespace: "default", ServerLogLevel: "warn", StartTimeout: 2 * time.Minute},
		hostPort: taken.Addr().String(), log: newLogBuffer(1 << 20)}
	cli, err := CLIPath()
	if err != nil {
		t.Skip(err)
	}
	s.cliPath = cli
	_, _, err = s.startFirst()
	require.Error(t, err)
	assert.ErrorIs(t, err, errAddressInUse)
	assert.Contains(t, err.Error(), "exited before answering")
	assert.Equal(t, 1, strings.Count(s.Log(), "starting temporal"), "a named address is not swapped for another")
}
