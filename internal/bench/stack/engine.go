package stack

import (
	"context"
	"errors"

	"github.com/meshroll/meshroll/internal/agent"
)

// removeContainers removes, on the engine at socket (a unix socket's path
// or an http:// URL, as the docker runtime takes it; empty: the engine's
// default), every container labelled for one of machines: the docker
// runtime leaves its containers running when its agent stops, as a
// deployed agent must, and a bench run must leave the engine as it found
// it.
func removeContainers(ctx context.Context, socket string, machines []string) error {
	if socket == "" {
		socket = agent.DefaultDockerSocket
	}
	var errs []error
	for _, m := range machines {
		errs = append(errs, agent.NewDockerRuntime(m, socket).Purge(ctx))
	}
	return errors.Join(errs...)
}
