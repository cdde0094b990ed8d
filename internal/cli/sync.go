package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// syncResult is one module's sync in machine sync's JSON output; State and
// Reason are the final ones with --wait.
type syncResult struct {
	Module   string `json:"module"`
	Plan     string `json:"plan"`
	Existing bool   `json:"existing"`
	// Remove: the config does not give the machine the module; the sync
	// stops it.
	Remove bool               `json:"remove,omitempty"`
	State  meshapi.PlanStatus `json:"state,omitempty"`
	Reason string             `json:"reason,omitempty"`
}

func (a *app) machineSyncCommand() *cobra.Command {
	var module, by string
	var wait bool
	cmd := &cobra.Command{
		Use:   "sync NAME [--module M] [--wait]",
		Short: "Bring a machine to the newest healthy build of every module it should run",
		Long: `sync brings a machine that was added to the config, re-imaged or has drifted to
the newest build of each module it should run that ran healthy somewhere and is
not rejected: one plan per module (ID sync/<machine>/<module>), each pushed
through the machine's workflow with the guard and health checks of a merge. A
module already on something newer is left as it runs.

A module its host runs that the config does not give the machine (starter
status shows it as unexpected) is stopped the same way: a plan (ID
sync/<machine>/<module>) sends the machine what it runs without it.

--module syncs (or stops) one module only. --wait follows every plan to its end; the exit
code is 3 when one did not converge or was not superseded.`,
		Example: `  starter machine sync edge-3 --wait
  starter machine sync control-node --module host --output json`,
		Args: machineNameArg,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			cfg, path, err := a.loadConfigFor(cmd.Context(), name)
			if err != nil {
				return err
			}
			if module != "" {
				if _, err := moduleTargets(cfg, path, module); err != nil {
					return err
				}
			}
			if by == "" {
				by = operator()
			}
			// What the host runs that the config does not give it: each is
			// stopped by a sync of its own.
			st, err := machines.ReadStatus(cmd.Context(), cfg, machines.Sources{Dial: a.dialer(cfg)}, machines.StatusFilter{Machine: name, Module: module})
			if err != nil {
				return err
			}
			var syncs []meshapi.Sync
			var modules []string
			for _, r := range st.Rows {
				switch {
				case r.HostError != "":
					return fmt.Errorf("machine %s: %s", name, r.HostError)
				case r.Drift == machines.DriftUnexpected:
					syncs = append(syncs, meshapi.Sync{Machine: name, By: by, Client: ClientIdentity(), Remove: true})
					modules = append(modules, r.Module)
				case slices.Contains(cfg.Machines[name].Modules, r.Module):
					syncs = append(syncs, meshapi.Sync{Machine: name, By: by, Client: ClientIdentity()})
					modules = append(modules, r.Module)
				}
			}
			if len(modules) == 0 {
				if module != "" {
					return usagef(nil, "machine %s neither runs module %q by %s (it runs: %s) nor has it running: nothing to sync",
						name, module, path, strings.Join(cfg.Machines[name].Modules, ", "))
				}
				return usagef(nil, "machine %s runs no module by %s and its host runs none: nothing to sync", name, path)
			}
			return a.withClient(cmd.Context(), func(ctx context.Context, c client.Client) error {
				return a.sync(ctx, c, cfg.Temporal.TaskQueue, cfg.PushPolicy(), modules, syncs, wait)
			})
		}),
	}
	cmd.Flags().StringVar(&module, "module", "", "sync this module only")
	cmd.Flags().StringVar(&by, "by", "", "who syncs (default: the user running the starter)")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow every plan to its end and exit 3 unless each converged or was superseded")
	return cmd
}

// sync starts a sync plan per module, in order, and with wait follows each
// to its end; the machine workflow serialises their pushes either way.
func (a *app) sync(ctx context.Context, c client.Client, taskQueue string, policy meshapi.PushPolicy, modules []string, syncs []meshapi.Sync, wait bool) error {
	var results []syncResult
	var failed error
	for i, m := range modules {
		started, err := plans.Start(ctx, c, taskQueue, meshapi.PlanInput{
			Module: m, Policy: policy, Sync: &syncs[i],
		})
		if err != nil {
			return err
		}
		r := syncResult{Module: m, Plan: started.ID, Existing: started.Existing, Remove: syncs[i].Remove}
		if !a.json() {
			verb := "started"
			if syncs[i].Remove {
				verb = "(not in the config: stopping) started"
			}
			if started.Existing {
				verb = "already running:"
			}
			if err := a.printf("%s %s %s\n", m, verb, started.ID); err != nil {
				return err
			}
		}
		if wait {
			final, err := plans.Wait(ctx, c, started.ID, WaitInterval, nil)
			if err != nil {
				return interrupted(started.ID, planError(started.ID, err))
			}
			r.State, r.Reason = final.State, final.Reason
			if err := endError(final); err != nil && failed == nil {
				failed = err
			}
			if !a.json() {
				if err := a.printf("%s %s: %s\n", m, final.State, final.Reason); err != nil {
					return err
				}
			}
		}
		results = append(results, r)
	}
	if a.json() {
		if err := a.printJSON(results); err != nil {
			return err
		}
	}
	return failed
}
