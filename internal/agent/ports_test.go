package agent

import (
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port

	_, err = PortRange{busy, busy}.pick(nil)
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
