package workerapp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/config"
)

// sourcesTimeout bounds CheckSources: a few git calls per module.
const sourcesTimeout = time.Minute

// CheckSources checks that every module's source is where the config says,
// for the worker to refuse a config it could not build from when it
// starts, as it refuses any other mistake in the file, rather than fail
// the first merge of the module at its build: a repo that is a directory
// here must be a git repository, and the module's path a directory in it
// (in its working tree or on its main line), and a repo given as a URL,
// which the worker cannot build from, is refused. Each problem names the
// module's key, where it is in the file and what to do. The starter does
// not check this: it reads the same file in places (a CI job, the compose
// file's starter) that have no clone.
func CheckSources(ctx context.Context, cfg *config.Config, configDir string) error {
	ctx, cancel := context.WithTimeout(ctx, sourcesTimeout)
	defer cancel()
	var ps []config.Problem
	for _, name := range cfg.ModuleNames() {
		m := cfg.Modules[name]
		key := "modules." + name
		dir, local := m.RepoDir(configDir)
		if !local {
			ps = append(ps, config.Problem{Key: key + ".repo", Message: m.URLRepoProblem(name)})
			continue
		}
		err := build.CheckPath(ctx, dir, m.Branch, m.Path)
		switch {
		case err == nil:
		case errors.Is(err, build.ErrNoRepository):
			ps = append(ps, config.Problem{Key: key + ".repo", Message: fmt.Sprintf(
				"%v; name the git repository module %s is built from, relative to the config file's directory (\".\" for the one beside it)", err, name)})
		case ctx.Err() != nil:
			return fmt.Errorf("check the modules' sources: %w", ctx.Err())
		default:
			ps = append(ps, config.Problem{Key: key + ".path", Message: fmt.Sprintf(
				"%v; set it to module %s's directory, relative to the repository's root", err, name)})
		}
	}
	return cfg.Invalid(ps...)
}
