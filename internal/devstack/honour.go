package devstack

import (
	"fmt"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/mesh"
)

// runtimeWarnings says, for each machine whose runtime cannot honour the
// settings of a module the machine runs, which module and setting, so that
// the developer hears it when the stack starts and not first as a refused
// push. The dev stack is where the worker can know this: it chose every
// agent's runtime itself (--runtime). A deployed worker cannot, since the
// config does not say which runtime a machine's agent runs; there the host
// refuses such a push with the field named. The containers checked carry
// the module's settings alone (no build yet): the exec runtime's refusals
// depend on nothing else.
func runtimeWarnings(cfg *config.Config, runtimes map[string]agent.Runtime) []string {
	var out []string
	for _, name := range machineOrder(cfg) {
		ch, ok := runtimes[name].(agent.Checker)
		if !ok {
			continue
		}
		var cs []mesh.Container
		for _, mod := range cfg.Machines[name].Modules {
			m := cfg.Modules[mod]
			settings, err := m.Settings()
			if err != nil {
				// A validated config always reads; Validate has said why.
				continue
			}
			cs = append(cs, mesh.Container{Module: mod, Network: m.Network, Settings: settings})
		}
		if err := ch.Check(cs); err != nil {
			out = append(out, fmt.Sprintf("machine %s: its %s runtime will refuse every push of these settings: %v", name, runtimes[name].Name(), err))
		}
	}
	return out
}
