package devstack

import (
	"context"
	"errors"
	"fmt"
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
