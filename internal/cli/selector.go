package cli

import (
	"slices"
	"strings"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/selector"
)

// selectorHelp is what --selector takes, for the flags' help.
const selectorHelp = `only machines whose labels match this label selector, such as "ring=canary", "site in (fra1, ams2)", "gpu" or "!gpu" (comma: and)`

// selectMachines reads a --selector and the machines of cfg it picks, by
// the labels in the mesh config. A selector that does not parse, or picks
// no machine, is the command line's fault, said before Temporal is dialled
// or a host asked. An empty one picks every machine, and names none.
func selectMachines(cfg *config.Config, path, src string) (selector.Selector, []string, error) {
	if strings.TrimSpace(src) == "" {
		return selector.Selector{}, nil, nil
	}
	sel, err := selector.Parse(src)
	if err != nil {
		return selector.Selector{}, nil, usagef(err, "--selector: %v", err)
	}
	names := cfg.Selected(sel)
	if len(names) == 0 {
		return selector.Selector{}, nil, usagef(nil, "--selector %q matches no machine of %s (labels: %s)", src, path, fleetLabels(cfg))
	}
	return sel, names, nil
}

// fleetLabels lists the label keys and values the fleet's machines carry,
// for a selector that matches none.
func fleetLabels(cfg *config.Config) string {
	seen := map[string]bool{}
	var out []string
	for _, name := range cfg.MachineNames() {
		for k, v := range cfg.Machines[name].Labels {
			if kv := k + "=" + v; !seen[kv] {
				seen[kv] = true
				out = append(out, kv)
			}
		}
	}
	if len(out) == 0 {
		return "no machine has any"
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
