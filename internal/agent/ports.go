package agent

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
)

// PortRange is where an agent picks the ports of containers whose probe
// asks for one (mesh.PortAuto), from Min to Max inclusive.
//
// It lies outside the kernel's ephemeral range (Linux: 32768–60999 by
// default, net.ipv4.ip_local_port_range), as Nomad's dynamic ports do: a
// port picked there is free when picked but not reserved, and every
// outgoing connection and every listener on port 0 on the machine draws
// from the ephemeral range, so one of them could take it before the
// container binds it; the container then fails to start and another
// server answers its probe. Below that range only other picked ports and
// services configured on fixed ports compete.
type PortRange struct {
	Min, Max int
}

// DefaultPorts is the range an agent picks in unless told otherwise.
var DefaultPorts = PortRange{Min: 20000, Max: 32000}

// ParsePortRange reads "MIN-MAX", as the --ports flag takes it.
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, ok := strings.Cut(s, "-")
	minP, err1 := strconv.Atoi(strings.TrimSpace(lo))
	maxP, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if !ok || err1 != nil || err2 != nil {
		return PortRange{}, fmt.Errorf("port range %q: want MIN-MAX, such as %d-%d", s, DefaultPorts.Min, DefaultPorts.Max)
	}
	r := PortRange{Min: minP, Max: maxP}
	if r.Min < 1 || r.Max > 65535 || r.Min > r.Max {
		return PortRange{}, fmt.Errorf("port range %q: want 1 <= MIN <= MAX <= 65535", s)
	}
	return r, nil
}

// String is the range as ParsePortRange reads it.
func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.Min, r.Max) }

// pick returns a port of r that is not in taken and that a loopback
// listener could bind just now, trying ports at random.
func (r PortRange) pick(taken map[int]bool) (int, error) {
	n := r.Max - r.Min + 1
	for range min(4*n, 256) {
		p := r.Min + rand.IntN(n)
		if taken[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		if err := ln.Close(); err != nil {
			return 0, fmt.Errorf("pick a port: %w", err)
		}
		return p, nil
	}
	return 0, errors.New("pick a port: no free port found in " + r.String() + " (set the agent's --ports to a wider or emptier range)")
}
