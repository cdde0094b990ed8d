package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshroll/meshroll/internal/demo"
	"github.com/meshroll/meshroll/internal/workerapp"
)

type demoOpts struct {
	namespace string
	gap       time.Duration
	dir       string
	examples  string
}

func (a *app) demoCommand() *cobra.Command {
	var o demoOpts
	cmd := &cobra.Command{
		Use:   "demo [--gap 60s] [--dir DIR]",
		Short: "Re-enact the stale-controller incident on a demo mesh of its own",
		Long: `demo is a guided, real re-enactment of the incident meshroll exists for, against
the running dev stack's Temporal server and registry (go run ./worker --dev).

It brings up its own small mesh in process, never touching your checkout or
machines: a scratch git repository with copies of examples/controller and
examples/host, a worker on a demo task queue, and two host agents (demo-edge in
tier 1, demo-control, the control plane, in tier 2) running the built images as
real processes. Then:

  1. merges controller v1 and host v1; both roll out;
  2. merges host v2 with a gate before tier 2: the plan composes demo-control
     while controller v1 runs, records it, and waits;
  3. --gap later (a minute, as in the incident) merges controller v2, which
     rolls out to demo-control;
  4. approves the host plan: at push time it is rebased onto controller v2
     instead of pushing back the v1 it recorded;
  5. shows each machine's journal.

The demo runs in a Temporal namespace of its own (--namespace, created if
missing), so its plans and machine workflows stay out of your mesh's list; see
them in the Web UI under that namespace. Exit 0 when the host plan reported
the rebase and the control plane was not downgraded, 1 otherwise.`,
		Example: `  starter demo
  starter demo --gap 5s --output json`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error { return a.demo(cmd.Context(), o) }),
	}
	f := cmd.Flags()
	f.DurationVar(&o.gap, "gap", demo.DefaultGap, "time between the two merges")
	f.StringVar(&o.namespace, "namespace", demo.DefaultNamespace, "Temporal namespace the demo runs in (created if missing), apart from the mesh's own")
	f.StringVar(&o.dir, "dir", "", "scratch directory for the demo's repository and state, kept afterwards (default: a temporary one, removed)")
	f.StringVar(&o.examples, "examples", "", "directory holding controller/ and host/ to copy (default: examples/ of the checkout the demo runs in)")
	return cmd
}

func (a *app) demo(ctx context.Context, o demoOpts) error {
	if o.gap <= 0 {
		return usagef(nil, "--gap must be positive, got %s", o.gap)
	}
	cfg, _, err := a.loadConfig(ctx)
	if err != nil {
		return err
	}
	examples := o.examples
	if examples == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if examples, err = demo.FindExamples(wd); err != nil {
			return err
		}
	}
	reg := workerapp.RegistryOptions(cfg.Registry)
	if err := demo.Preflight(ctx, reg); err != nil {
		return err
	}
	cfg.Temporal.Namespace = o.namespace
	c, err := a.dial(ctx, cfg)
	if err != nil {
		return &messageError{
			msg: fmt.Sprintf("Temporal unreachable at %s; start the dev stack first: go run ./worker --dev", cfg.Temporal.Address),
			err: err,
		}
	}
	defer c.Close()

	var narration io.Writer = a.stdout
	if a.json() {
		narration = a.stderr
	}
	sum, err := demo.Run(ctx, demo.Options{
		Client: c, Namespace: cfg.Temporal.Namespace, Registry: reg,
		Examples: examples, Dir: o.dir, Gap: o.gap, Out: narration,
	})
	if a.json() && (err == nil || errors.Is(err, demo.ErrNotDemonstrated)) {
		if perr := a.printJSON(sum); perr != nil {
			return perr
		}
	}
	return err
}
