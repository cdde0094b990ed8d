package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

func (a *app) machineLogsCommand() *cobra.Command {
	var (
		module string
		tail   int
		follow bool
	)
	cmd := &cobra.Command{
		Use:   "logs NAME --module M [--tail N] [--follow]",
		Short: "Print a module's container output on a machine, and follow it",
		Long: `logs asks the machine's host agent for the output of the module's container
(stdout and stderr together, as the container wrote them: the exec runtime's
log file with its "meshroll exec:" lines, or the engine's logs) and prints
the last --tail lines (` + strconv.Itoa(host.DefaultLogTail) + `; at most ` + strconv.Itoa(host.MaxLogTail) + `). With --follow it goes on printing what the
container writes until Ctrl-C (exit 0) or the container is stopped, replaced
or removed (a roll-out replaces it: run logs again for the new one).

It reaches the host as a push does: the machine's host, token and ca_file in
the mesh config. The output is the container's own, whatever --output says.`,
		Example: `  starter machine logs edge-1 --module host
  starter machine logs control-node --module mesh-controller --tail 20 --follow`,
		Args: machineNameArg,
	}
	cmd.RunE = a.run(func(cmd *cobra.Command, args []string) error {
		name := args[0]
		cfg, _, err := a.loadConfigFor(cmd.Context(), name)
		if err != nil {
			return err
		}
		m := cfg.Machines[name]
		if err := logsFlags(name, m, module, tail); err != nil {
			return err
		}
		c, err := m.HostClient()
		if err != nil {
			return fmt.Errorf("machine %s: %w", name, err)
		}
		req := host.LogsRequest{Module: module, Tail: tail, Follow: follow}
		err = c.Logs(cmd.Context(), req, a.stdout)
		if err == nil && follow && cmd.Context().Err() == nil {
			_, _ = fmt.Fprintf(a.stderr, "the host ended the logs of %s on %s: its container stopped or was replaced, or the agent stopped\n", module, name)
		}
		return logsError(cmd.Context(), name, m, module, err)
	})
	f := cmd.Flags()
	f.StringVar(&module, "module", "", "the module whose container's output to print (required)")
	f.IntVar(&tail, "tail", host.DefaultLogTail, "how many of the last lines to print first (0 to "+strconv.Itoa(host.MaxLogTail)+")")
	f.BoolVarP(&follow, "follow", "f", false, "go on printing what the container writes, until Ctrl-C")
	return cmd
}

// logsFlags checks machine logs' flags before anything is asked of a host.
func logsFlags(name string, m config.Machine, module string, tail int) error {
	switch {
	case module == "":
		return usagef(nil, "machine logs %s needs --module: one of the modules the config gives it (%s)", name, joinOr(m.Modules, "none"))
	case tail < 0 || tail > host.MaxLogTail:
		return usagef(nil, "--tail %d: want 0 to %d lines", tail, host.MaxLogTail)
	}
	if err := mesh.ValidName("module", module); err != nil {
		return usagef(err, "--module: %v", err)
	}
	return nil
}

// logsError words what stopped machine logs for the person who ran it: Ctrl-C
// (ctx ended) is no error, and a host that would not or could not answer is
// named with what to do.
func logsError(ctx context.Context, name string, m config.Machine, module string, err error) error {
	if err == nil || ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	if msg, ok := m.TokenProblem(name, err); ok {
		return &messageError{msg: msg, err: err}
	}
	if r, ok := host.IsRefused(err); ok {
		switch r.Code {
		case host.CodeNotFound:
			return &messageError{err: err, msg: fmt.Sprintf("machine %s has no module %s to show: %s (host %s; the config gives it %s; see \"starter machine show %s\")",
				name, module, r.Message, m.Host, joinOr(m.Modules, "none"), name)}
		case host.CodeUnsupported:
			return &messageError{err: err, msg: fmt.Sprintf("machine %s cannot show logs: %s (host %s)", name, r.Message, m.Host)}
		}
	}
	var se *host.StatusError
	if errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusNotImplemented) {
		return &messageError{err: err, msg: fmt.Sprintf("machine %s cannot show logs: host %s answered %s to %s (an agent from before logs, or a fleet's own that serves none)",
			name, m.Host, se.Text, host.PathLogs)}
	}
	if host.IsUnreachable(err) {
		return &messageError{err: err, msg: fmt.Sprintf("machine %s: host %s did not answer: %v; is its host agent running there, and is machines.%s.host right?",
			name, m.Host, errors.Unwrap(err), name)}
	}
	return fmt.Errorf("machine %s: %w", name, err)
}

// joinOr joins ss with commas, or is none when there are none.
func joinOr(ss []string, none string) string {
	if len(ss) == 0 {
		return none
	}
	return strings.Join(ss, ", ")
}
