package devstack

import (
	"fmt"
	"path/filepath"

	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/enroll"
	"github.com/meshroll/meshroll/internal/workerapp"
)

const (
	// DefaultEnrollListen is where the stack serves the enrollment
	// endpoint, when the config turns enrollment on (enroll.modules) and
	// worker.enroll_listen says nowhere: on loopback, beside the merge
	// receiver.
	DefaultEnrollListen = "127.0.0.1:8236"
	// EnrollTokenName is the file in the state directory holding the
	// enrollment token the stack makes when the config gives none.
	EnrollTokenName = "enroll-token"
)

// enrollDefaults serves enrollment, on loopback, with a token kept in the
// state directory (made at start), when the config turns it on and gives
// no endpoint or token of its own.
func enrollDefaults(cfg *config.Config) {
	if len(cfg.Enroll.Modules) == 0 {
		return
	}
	if cfg.Worker.EnrollListen == "" {
		cfg.Worker.EnrollListen = DefaultEnrollListen
	}
	if cfg.Worker.EnrollToken == "" && cfg.Worker.EnrollTokenFile == "" {
		cfg.Worker.EnrollTokenFile = filepath.Join(cfg.StateDir, EnrollTokenName)
	}
}

// serveEnroll serves the enrollment endpoint as the worker does, and says
// how an agent asks there.
func (s *stack) serveEnroll(c client.Client, mesh config.Source) error {
	if s.cfg.Worker.EnrollListen == "" {
		return nil
	}
	token := "the token of worker.enroll_token"
	if f := s.cfg.Worker.EnrollTokenFile; f != "" {
		if f == filepath.Join(s.state, EnrollTokenName) {
			if err := ensureSecret(f); err != nil {
				return err
			}
		}
		token = s.display(f)
	}
	addr, stop, err := workerapp.ServeEnroll(c, mesh, s.o.Log)
	if err != nil {
		return err
	}
	s.onStop("enrollment endpoint", stopServer(stop))
	url := "http://" + dialable(addr.String())
	s.say("enroll", "%s%s  (machines ask to join: host --machine NAME --listen ADDR --enroll %s --enroll-token-file %s; then starter machine approve NAME)",
		url, enroll.Path, url, token)
	return nil
}

// followFile is the stack's config read again when its file changes, as
// the worker command's is: machines admitted through enrollment, and
// machines added to the file, join without a restart (an agent for a
// machine added to the file is the developer's to start).
func (s *stack) followFile() (*config.Live, error) {
	live, err := config.NewLive(s.configPath, s.cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("follow %s: %w", s.display(s.configPath), err)
	}
	return live, nil
}
