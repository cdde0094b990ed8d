package devstack

import (
	"context"
	"errors"
	"fmt"

	"github.com/meshroll/meshroll/internal/agent"
)

type stopStep struct {
	what string
	stop func() error
}

// onStop records how to undo a step just taken.
func (s *stack) onStop(what string, stop func() error) {
	s.stops = append(s.stops, stopStep{what: what, stop: stop})
}

// stopAll undoes every step, the last taken first, and says what failed.
func (s *stack) stopAll() error {
	var errs []error
	for i := len(s.stops) - 1; i >= 0; i-- {
		st := s.stops[i]
		if err := st.stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", st.what, err))
		}
	}
	s.stops = nil
	return errors.Join(errs...)
}

func (s *stack) closeRuntimes() error {
	var errs []error
	for name, rt := range s.runtimes {
		ctx, cancel := context.WithTimeout(context.Background(), agentShutdownGrace)
		if err := rt.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("runtime of %s: %w", name, err))
		}
		cancel()
		delete(s.runtimes, name)
	}
	return errors.Join(errs...)
}

// sayContainersStay tells, as the stack stops, that the machines'
// containers go on running on the engine (an agent stopped does not bounce
// its services; the next start adopts them), and how to remove them.
func (s *stack) sayContainersStay() error {
	sock := s.o.DockerSocket
	if sock == "" {
		sock = agent.DefaultDockerSocket
	}
	s.say("docker", "the machines' containers keep running; the next start adopts them. To remove them:")
	s.say("", "  docker -H unix://%s rm -f $(docker -H unix://%s ps -aq --filter label=io.meshroll.machine)", sock, sock)
	return nil
}
