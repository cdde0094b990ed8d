package testsuite

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
)

// Ports a test picks and binds later, or binds again after a restart, come
// from below the kernel's ephemeral range. A port in that range, once let
// go, can be taken by any outgoing connection on the box as its source port:
// a dev stack restarted on its own config once found its fleet page's port
// held that way. Below the range a port is only ever bound by name, and this
// process hands each one out once.
var portPicker struct {
	sync.Mutex
	next, low, high int // the next candidate, and the range walked
	given           map[int]bool
}

// pickPort is a loopback port that was free when asked and that no other
// test of this process was given.
func pickPort(t *testing.T) int {
	t.Helper()
	p := &portPicker
	p.Lock()
	defer p.Unlock()
	if p.given == nil {
		// Below the host agents' container ports too (agent.DefaultPorts),
		// which the exec and docker tests' agents hand out.
		p.low, p.high = 10000, min(ephemeralLow(), agent.DefaultPorts.Min)
		if p.high-p.low < 1000 {
			t.Fatalf("the kernel's ephemeral ports start at %d, leaving no room below for test ports; raise net.ipv4.ip_local_port_range's low end above 11000", p.high)
		}
		p.next = p.low + rand.IntN(p.high-p.low)
		p.given = map[int]bool{}
	}
	for range p.high - p.low {
		port := p.next
		if p.next++; p.next == p.high {
			p.next = p.low
		}
		if p.given[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // something on the box holds it
		}
		require.NoError(t, l.Close())
		p.given[port] = true
		return port
	}
	t.Fatalf("no free loopback port in %d–%d", p.low, p.high-1)
	return 0
}

// ephemeralLow is where the kernel's ephemeral ports start (Linux's default
// when it cannot be read).
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var lo, hi int
		if _, err := fmt.Sscan(string(b), &lo, &hi); err == nil {
			low = lo
		}
	}
	return low
}

func freePort(t *testing.T) string {
	t.Helper()
	return strconv.Itoa(pickPort(t))
}

// freePorts is n distinct free loopback ports.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var ports []string
	for range n {
		ports = append(ports, freePort(t))
	}
	return ports
}
