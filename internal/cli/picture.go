package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/meshroll/meshroll/internal/catalogue/sqlcat"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/machinefeed"
	"github.com/meshroll/meshroll/internal/machines"
)

// fleetPicture opens the catalogue in which the worker keeps the fleet's
// picture of its hosts and its feed of the machine workflows (catalogue.dsn,
// or the SQLite file in the state directory beside the config at path), so
// that status and machine list read every host and machine workflow in one
// read each instead of asking each host and listing every workflow. It
// answers Sources with neither, and says why, when there is no catalogue to
// read from here (the default SQLite file of a worker on another machine is
// not here): the hosts are then asked directly and the workflows listed.
// The caller sets Sources.Dial; close releases the catalogue.
func fleetPicture(ctx context.Context, cfg *config.Config, path string) (src machines.Sources, close func(), why error) {
	dsn := cfg.CatalogueDSN(filepath.Dir(path))
	if file, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
			return src, func() {}, fmt.Errorf("no catalogue at %s: set catalogue.dsn to the worker's", file)
		}
	}
	cat, err := sqlcat.Open(ctx, dsn)
	if err != nil {
		return src, func() {}, err
	}
	return machines.Sources{Hosts: cat.HostStates, Workflows: machinefeed.Kept{Store: cat}}, func() { _ = cat.Close() }, nil
}

// statusPicture is fleetPicture for status, logging why there is none.
func (a *app) statusPicture(ctx context.Context, cfg *config.Config, path string) (machines.Sources, func(), error) {
	src, closePic, why := fleetPicture(ctx, cfg, path)
	if why != nil {
		a.log.Debug().Err(why).Msg("no fleet picture: asking every host")
	}
	return src, closePic, why
}
