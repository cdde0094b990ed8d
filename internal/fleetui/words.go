package fleetui

import (
	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/mesh"
)

// hostBadge is the word on a machine whose host could not be read.
func hostBadge(m machines.Row) string {
	switch m.HostStatus {
	case machines.HostStale, machines.HostUnknown:
		return "host " + m.HostStatus
	}
	return "host?"
}

// healthWords is what the host judges of a container, in a word.
func healthWords(r machines.StatusRow) string {
	switch {
	case r.HostError != "":
		return ""
	case r.Generation == nil:
		return "not running"
	case r.State != mesh.StateRunning:
		return r.State
	case r.Health != "":
		return r.Health
	}
	return r.State
}
