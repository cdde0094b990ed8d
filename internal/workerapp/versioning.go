package workerapp

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/meshroll/meshroll/internal/backoff"
	"github.com/meshroll/meshroll/internal/config"
)

// WithDeployment returns o joined to the Worker Deployment that v names,
// with build ID BuildID(v), when v is enabled; otherwise o unchanged. The
// workflows' behaviours (pinned plans, auto-upgrading machines) are set at
// registration (Register).
func WithDeployment(o worker.Options, v config.Versioning) worker.Options {
	if !v.Enabled {
		return o
	}
	o.DeploymentOptions = worker.DeploymentOptions{
		UseVersioning: true,
		Version:       Version(v),
	}
	return o
}

// Version is the Worker Deployment Version the config names.
func Version(v config.Versioning) worker.WorkerDeploymentVersion {
	return worker.WorkerDeploymentVersion{DeploymentName: v.Deployment(), BuildID: BuildID(v)}
}

// BuildID is the build ID a versioned worker announces: worker.versioning.
// build_id if set, else the VCS revision Go stamped into the binary (with
// "-dirty" when the tree had changes), else "". A binary built outside a
// checkout, or by go run or go test, has no revision; give it one with
// build_id, MESHROLL_WORKER_VERSIONING_BUILD_ID or the worker's --build-id.
func BuildID(v config.Versioning) string {
	if v.BuildID != "" {
		return v.BuildID
	}
	return buildRevision()
}

func buildRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}

// ErrNoBuildID is returned by CheckVersioning for a versioned worker that
// cannot name its build.
var ErrNoBuildID = errors.New("worker.versioning is enabled but the worker has no build ID: set worker.versioning.build_id (MESHROLL_WORKER_VERSIONING_BUILD_ID), pass --build-id, or build the worker from a git checkout so that Go stamps the revision")

// CheckVersioning says whether New can build a versioned worker from v.
func CheckVersioning(v config.Versioning) error {
	if v.Enabled && BuildID(v) == "" {
		return ErrNoBuildID
	}
	return nil
}

// Readiness is the worker's /readyz check: the worker has started (its
// pollers run) and the Temporal frontend answers a health check now.
type Readiness struct {
	client  client.Client
	started atomic.Bool
}

// NewReadiness checks c; the worker is not ready until Started.
func NewReadiness(c client.Client) *Readiness { return &Readiness{client: c} }

// Started marks the worker started.
func (r *Readiness) Started() { r.started.Store(true) }

// Check is the liveness.Check.
func (r *Readiness) Check(ctx context.Context) error {
	if !r.started.Load() {
		return errors.New("worker not started")
	}
	if _, err := r.client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return fmt.Errorf("temporal unreachable: %w", err)
	}
	return nil
}

// MakeCurrent makes this worker's build the current version of its Worker
// Deployment, so that new plans and every machine workflow run on it. The
// server knows a version only once one of its workers has polled, so it
// retries until ctx ends. It is what `temporal worker deployment
// set-current-version` does, for a deployment's first worker or a roll-out
// that switches as soon as the new worker is up.
func MakeCurrent(ctx context.Context, c client.Client, v config.Versioning, log zerolog.Logger) error {
	ver := Version(v)
	h := c.WorkerDeploymentClient().GetHandle(ver.DeploymentName)
	b := backoff.New(100*time.Millisecond, 2*time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := h.SetCurrentVersion(cctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: ver.BuildID})
		cancel()
		if err == nil {
			log.Info().Str("deployment", ver.DeploymentName).Str("build_id", ver.BuildID).
				Msg("made this build the deployment's current version")
			return nil
		}
		if werr := b.Wait(ctx); werr != nil {
			return fmt.Errorf("make build %s current in deployment %s: %w (last error: %w)", ver.BuildID, ver.DeploymentName, werr, err)
		}
	}
}
