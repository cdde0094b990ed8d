package agent

import (
	"math/rand/v2"
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParsePortRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want PortRange
		err  string
	}{
		{in: "20000-32000", want: PortRange{20000, 32000}},
		{in: " 9000 - 9000 ", want: PortRange{9000, 9000}},
		{in: "9000", err: "want MIN-MAX"},
		{in: "a-b", err: "want MIN-MAX"},
		{in: "9001-9000", err: "MIN <= MAX"},
		{in: "0-10", err: "1 <= MIN"},
		{in: "60000-70000", err: "MAX <= 65535"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParsePortRange(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// A picked port lies in the range, is not one already given out, and is
// not one another process listens on; a range with nothing free says
// which setting widens it.
func TestPortRangePicksAFreePortInRange(t *testing.T) {
	ln, busy := listenBelowEphemeral(t)
	defer ln.Close()

	_, err := PortRange{busy, busy}.pick(nil)
	require.ErrorContains(t, err, "no free port found in "+strconv.Itoa(busy)+"-"+strconv.Itoa(busy))
	require.ErrorContains(t, err, "--ports")

	r := PortRange{Min: busy - 2, Max: busy + 1}
	taken := map[int]bool{busy - 2: true}
	for range 20 {
		p, err := r.pick(taken)
		require.NoError(t, err)
		require.GreaterOrEqual(t, p, r.Min)
		require.LessOrEqual(t, p, r.Max)
		require.NotEqual(t, busy, p, "a port another process listens on")
		require.NotEqual(t, busy-2, p, "a port already given out")
	}
	require.Less(t, DefaultPorts.Max, 32768, "the default range stays below Linux's ephemeral range")
}

// listenBelowEphemeral listens on a port of DefaultPorts with free
// neighbours. Below Linux's ephemeral range the kernel gives none of them
// to another test's connection in the meantime, as it did to both free
// ports of a range around a port the kernel picked (CI, 2026-12-06).
func listenBelowEphemeral(t *testing.T) (net.Listener, int) {
	t.Helper()
	for p := DefaultPorts.Min + 2 + rand.IntN(1000); p < DefaultPorts.Max-1; p += 4 {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		if portFree(p-1) && portFree(p+1) {
			return ln, p
		}
		_ = ln.Close()
	}
	t.Fatalf("no port of %s with free neighbours", DefaultPorts)
	return nil, 0
}

// portFree says whether a loopback port can be listened on now.
func portFree(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}
