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
	"github.com/meshroll/meshroll/internal/machines"
)

// fleetPicture opens the catalogue in which the worker keeps the fleet's
// picture of its hosts (catalogue.dsn, or the SQLite file in the state
// directory beside the config at path), so that status and machine list
// read every host in one read instead of asking each. It answers a nil
// Picture, and says why, when there is no catalogue to read from here (the
// default SQLite file of a worker on another machine is not here): the
// hosts are then asked directly, as before the picture. close releases it.
func fleetPicture(ctx context.Context, cfg *config.Config, path string) (pic machines.Picture, close func(), why error) {
	dsn := cfg.CatalogueDSN(filepath.Dir(path))
	if file, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
			return nil, func() {}, fmt.Errorf("no catalogue at %s: set catalogue.dsn to the worker's", file)
		}
	}
	cat, err := sqlcat.Open(ctx, dsn)
	if err != nil {
		return nil, func() {}, err
	}
	return cat.HostStates, func() { _ = cat.Close() }, nil
}

// statusPicture is fleetPicture for status, logging why there is none.
func (a *app) statusPicture(ctx context.Context, cfg *config.Config, path string) (machines.Picture, func(), error) {
	pic, closePic, why := fleetPicture(ctx, cfg, path)
	if why != nil {
		a.log.Debug().Err(why).Msg("no fleet picture: asking every host")
	}
	return pic, closePic, why
}
