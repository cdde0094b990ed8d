// Package cli is the starter's command line: `merge` starts (or finds) the
// plan for a merge and can follow it to its end; `plan list|show|watch`
// find and read plans and `plan approve|pause|resume|abort` steer one;
// `machine list|show` read the machines: what their hosts report and were
// told, and what their machine workflows are pushing; `status` reads the
// whole fleet at once, machine by module: what runs, how far behind the
// newest healthy build, the plan that put it there, drift, once or live;
// and the operator's levers: `build list|reject` and `rollback`.
//
// It lives in a package rather than in package main so that the starter's
// main stays a thin exit-code mapper and the integration tests can drive
// exactly what an operator runs, in process, with their own stdout and
// stderr. Everything talks to Temporal through package plans; this package
// only parses, checks what can be checked before connecting, and words the
// results and errors for a person (table) or a script (json).
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/enroll"
	"github.com/meshroll/meshroll/internal/logging"
	"github.com/meshroll/meshroll/internal/temporalx"
)

// Output formats of --output.
const (
	OutputTable = "table"
	OutputJSON  = "json"
)

// DialTimeout bounds connecting to Temporal, so that an unreachable server
// fails a command in seconds instead of hanging a CI job.
const DialTimeout = 5 * time.Second

// WaitInterval is how often --wait polls the plan's state for progress.
const WaitInterval = 500 * time.Millisecond

// Execute runs the starter with args (without the program name), writing
// results to stdout and the SDK's logs to stderr. It never reads os.Args
// and never exits, so tests can call it in process; pass the error to
// ExitCode for the process's exit status. The error's text is what main
// prints after "starter: ".
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if args == nil {
		args = []string{} // cobra falls back to os.Args on nil
	}
	// The demo's in-process worker and agents log to stderr while its
	// narration is written there too; one lock for both streams keeps every
	// line whole and race-free, also when they are one writer.
	streams := logging.SyncWriters(stdout, stderr)
	a := &app{stdout: streams[0], stderr: streams[1]}
	root := a.rootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil && !a.ran {
		return cobraUsage(cmd, err)
	}
	return err
}

// app holds one invocation's flags and streams; a fresh one per Execute
// keeps concurrent in-process runs apart.
type app struct {
	stdout, stderr io.Writer

	configFlag string
	output     string
	logLevel   string

	log zerolog.Logger
	// cfg is the mesh config, once loadConfig has read it.
	cfg *config.Config
	// ran is set when a command's own code starts, so that Execute can tell
	// cobra's argument errors (usage) from the command's (failures).
	ran bool
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "starter",
		Short: "Start and steer meshroll roll-out plans",
		Long: `starter starts the roll-out plan for a merge to a module (build, compose,
then push tier by tier); lists, shows, watches, approves, pauses, resumes or
aborts plans; shows what the mesh's machines run and were told; shows the
whole fleet at a glance, once or live (status); and pulls the operator's
levers: reject a build (build reject) and roll a module back (rollback).

Every command takes --output table (for people, the default) or json (for
scripts). Exit codes: 0 ok, 1 failed, 2 usage (nothing was sent), 3 a
followed plan ended other than converged or superseded.

A plan's ID is plan/<module>/<commit> (a rollback's, rollback/<module>);
starting the same merge twice finds the plan it already started.`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		Args:              cobra.NoArgs,
		PersistentPreRunE: a.setup,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return cobraUsage(cmd, err) })
	pf := root.PersistentFlags()
	pf.StringVar(&a.configFlag, "config", "", "mesh config file (default $"+config.EnvConfig+" or "+config.DefaultPath+")")
	pf.StringVarP(&a.output, "output", "o", OutputTable, "output format: table or json")
	pf.StringVar(&a.logLevel, "log-level", "warn", "level of the Temporal SDK's logs on stderr: debug, info, warn, error, disabled")

	root.AddCommand(a.mergeCommand(), a.rollbackCommand(), a.planCommand(), a.machineCommand(), a.statusCommand(), a.buildCommand(),
		a.freezeCommand(), a.unfreezeCommand(), a.catalogueCommand(), a.demoCommand())
	return root
}

// setup checks the persistent flags and builds the logger before any
// command runs.
func (a *app) setup(cmd *cobra.Command, _ []string) error {
	switch a.output {
	case OutputTable, OutputJSON:
	default:
		return usagef(nil, "unknown --output %q (want %s or %s)", a.output, OutputTable, OutputJSON)
	}
	log, err := logging.New(a.stderr, a.logLevel, logging.FormatAuto)
	if err != nil {
		return &UsageError{Err: fmt.Errorf("--log-level: %w", err)}
	}
	a.log = log
	return nil
}

// run marks the start of a command's own work; see app.ran.
func (a *app) run(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a.ran = true
		return fn(cmd, args)
	}
}

// loadConfig reads the mesh config named by --config (or its defaults) and
// returns the path it resolved, for messages. With enrollment on
// (enroll.modules), the machines admitted through it join the file's, as
// they do in the worker's config in force; when Temporal cannot be asked
// which they are, the command goes on with the file's machines and says
// so on stderr.
func (a *app) loadConfig(ctx context.Context) (*config.Config, string, error) {
	path := config.ResolvePath(a.configFlag)
	cfg, err := config.Load(path)
	if err != nil {
		return nil, path, err
	}
	if len(cfg.Enroll.Modules) > 0 {
		cfg = a.admit(ctx, cfg)
	}
	a.cfg = cfg
	return cfg, path, nil
}

// admit is cfg with the machines admitted through enrollment.
func (a *app) admit(ctx context.Context, cfg *config.Config) *config.Config {
	adm, err := func() ([]config.Admitted, error) {
		c, err := a.dial(ctx, cfg)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		return enroll.In(c, cfg).Admitted(ctx)
	}()
	if err != nil {
		_, _ = fmt.Fprintf(a.stderr, "starter: the machines admitted through enrollment are left out: %v\n", err)
		return cfg
	}
	next, _ := cfg.Admit(adm)
	return next
}

func (a *app) dial(ctx context.Context, cfg *config.Config) (client.Client, error) {
	return temporalx.DialWith(ctx, cfg.Temporal, a.log, DialTimeout, func(o client.Options) client.Options {
		o.Identity = ClientIdentity()
		return o
	})
}

func (a *app) json() bool { return a.output == OutputJSON }

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// printRead prints what a read got, as JSON or by write, then returns
// partial: the error of a read that got only some of its answer (a host or
// Temporal unreachable), which fails the command only after what was read
// is shown.
func printRead[T any](a *app, v T, write func(io.Writer, T) error, partial error) error {
	var err error
	if a.json() {
		err = a.printJSON(v)
	} else {
		err = write(a.stdout, v)
	}
	if err != nil {
		return err
	}
	return partial
}

func (a *app) printf(format string, args ...any) error {
	if _, err := fmt.Fprintf(a.stdout, format, args...); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// interrupted words a cancelled wait: the plan runs on in Temporal.
func interrupted(id string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("stopped following plan %s (it goes on in Temporal): %w", id, err)
	}
	return err
}
