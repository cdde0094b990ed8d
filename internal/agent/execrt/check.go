package execrt

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// Check refuses what the exec runtime cannot honour, naming module and
// field, so that the agent refuses the whole declaration before anything
// is recorded: a bridge (it runs processes on the machine's own network
// and has no bridge to give one an address on), volumes, memory and CPU
// limits, and a user (a process is no container: it has no mounts or
// cgroup of its own, and runs as the agent's user). Stop grace it honours.
func (r *Runtime) Check(cs []mesh.Container) error {
	var problems []string
	for _, c := range cs {
		if c.Network == mesh.NetworkBridge {
			problems = append(problems, fmt.Sprintf("module %s: network %s: the exec runtime runs processes on the machine's own network; declare network: %s, or leave it out", c.Module, c.Network, mesh.NetworkHost))
		}
		for _, f := range []struct {
			field string
			set   bool
		}{
			{"volumes", len(c.Volumes) > 0},
			{"memory", c.MemoryBytes != 0},
			{"cpus", c.NanoCPUs != 0},
			{"user", c.User != ""},
		} {
			if f.set {
				problems = append(problems, fmt.Sprintf("module %s: %s: the exec runtime runs a process as the agent's user, with no mounts or limits of its own, so it cannot honour %s; run the module on a docker machine, or leave %s out", c.Module, f.field, f.field, f.field))
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// stopGrace is how long ct's process has between SIGTERM and SIGKILL: its
// declared stop grace, else the runtime's.
func (r *Runtime) stopGrace(ct *container) time.Duration {
	if ms := ct.spec.StopGraceMS; ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return r.o.StopGrace
}
