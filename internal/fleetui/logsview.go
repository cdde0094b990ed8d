package fleetui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
)

// A machine's page shows the last logLines lines of each of its modules'
// output, read from its host at every look (the page's live part too),
// each read bounded by logsTimeout so that a slow host costs the page that
// long at most, and logBytes of each, so that a module writing long lines
// cannot bloat the page.
const (
	logLines    = 20
	logsTimeout = 2 * time.Second
	logBytes    = 16 << 10
)

// moduleLog is the end of one module's output as the page shows it, or the
// one line saying why it could not be read.
type moduleLog struct {
	Module  string
	Text    string
	Problem string
	// Absent says, without alarm, that the host runs no container of the
	// module: the config gives it, but no plan has put it there yet.
	Absent string
	// Follow is the starter command that follows it.
	Follow string
}

// Logs implements Source: the host's answer to the logs of module, at
// most logBytes of it (its end).
func (r Reader) Logs(ctx context.Context, name, module string, tail int) (string, error) {
	m, ok := r.Config.Current().Machines[name]
	if !ok {
		return "", fmt.Errorf("%w: %s", errUnknownMachine, name)
	}
	c, err := m.HostClient()
	if err != nil {
		return "", fmt.Errorf("machine %s: %w", name, err)
	}
	var b lastBytes
	err = c.Logs(ctx, host.LogsRequest{Module: module, Tail: tail}, &b)
	return b.String(), err
}

// lastBytes keeps the last logBytes written to it.
type lastBytes struct {
	b   []byte
	cut bool
}

func (l *lastBytes) Write(p []byte) (int, error) {
	l.b = append(l.b, p...)
	if over := len(l.b) - logBytes; over > 0 {
		l.b, l.cut = l.b[over:], true
	}
	return len(p), nil
}

func (l *lastBytes) String() string {
	if l.cut {
		return "…" + string(l.b)
	}
	return string(l.b)
}

// readLogs reads the end of each module's output on machine name, all at
// once, each within logsTimeout.
func (s *Server) readLogs(ctx context.Context, name string, modules []string) []moduleLog {
	ctx, cancel := context.WithTimeout(ctx, logsTimeout)
	defer cancel()
	m := s.o.Config.Current().Machines[name]
	out := make([]moduleLog, len(modules))
	var wg sync.WaitGroup
	for i, mod := range modules {
		out[i] = moduleLog{Module: mod, Follow: fmt.Sprintf("starter machine logs %s --module %s --follow", name, mod)}
		wg.Go(func() {
			text, err := s.o.Source.Logs(ctx, name, mod, logLines)
			out[i].Text = text
			if r, ok := host.IsRefused(err); ok && r.Code == host.CodeNotFound {
				out[i].Absent, out[i].Follow = fmt.Sprintf("Not running on %s: no plan has put %s here yet, so it has no output.", name, mod), ""
			} else if err != nil {
				out[i].Problem = logProblem(name, m, err)
			}
		})
	}
	wg.Wait()
	return out
}

// logProblem is, in one line, why a module's logs could not be read.
func logProblem(name string, m config.Machine, err error) string {
	if msg, ok := m.TokenProblem(name, err); ok {
		return msg
	}
	if r, ok := host.IsRefused(err); ok && r.Code == host.CodeUnsupported {
		return "No logs: " + r.Message + "."
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("The host did not give its logs within %s.", logsTimeout)
	}
	return "The host did not give its logs: " + strings.Join(strings.Fields(err.Error()), " ")
}
