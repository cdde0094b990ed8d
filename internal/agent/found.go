package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/mesh"
)

// findLeftRunning asks a Finder runtime what runs for the machine, for an
// agent started on an empty state directory; nil from any other runtime, or
// when the engine cannot say (the agent then starts empty, as before: the
// first declaration adopts a container of the same spec by name).
func findLeftRunning(ctx context.Context, rt Runtime, log zerolog.Logger) []mesh.Container {
	f, ok := rt.(Finder)
	if !ok {
		return nil
	}
	found, err := f.Find(ctx)
	if err != nil {
		log.Warn().Err(err).Msg("could not look for containers left running for this machine; starting with none")
		return nil
	}
	return found
}

// keepFoundLocked journals and records what findLeftRunning found, as the
// new journal's first entry, so that the report shows what runs (and the
// runtime keeps it) until the first declaration, and the journal says why
// the machine ran containers no declaration here named.
func (a *Agent) keepFoundLocked(found []mesh.Container) error {
	modules := make([]string, len(found))
	for i, c := range found {
		modules[i] = c.Module + " " + mesh.ShortDigest(c.Digest)
	}
	d := mesh.Declaration{
		Machine: a.machine,
		Reason: fmt.Sprintf("the agent started with no state and found %s left running for machine %s; "+
			"it keeps them as they were declared until the first declaration", strings.Join(modules, ", "), a.machine),
		Containers: found,
	}
	e := entryFor(d, OutcomeFound)
	if err := a.appendLocked(&e); err != nil {
		return fmt.Errorf("journal what it found running: %w", err)
	}
	a.ledger.Found(d)
	a.log.Warn().Strs("containers", modules).Msg("started with no state: found containers left running for this machine, keeping them")
	return a.checkpointLocked()
}
