package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// HostAskTimeout bounds asking one host for its report when listing
// builds: an unreachable host is named, not waited for.
const HostAskTimeout = 5 * time.Second

// RejectBuild records an operator's rejection in the catalogue. An unknown
// module or build, or an ambiguous commit, is permanent.
func (a *Activities) RejectBuild(ctx context.Context, in meshapi.RejectInput) (mesh.Rejection, error) {
	if err := a.knownModule(in.Module); err != nil {
		return mesh.Rejection{}, err
	}
	if _, _, err := catalogue.CommitPrefix(in.Commit); err != nil {
		msg := fmt.Sprintf("commit %q of %s: %v", in.Commit, in.Module, err)
		return mesh.Rejection{}, temporal.NewNonRetryableApplicationError(msg, meshapi.ErrInvalidInput, err)
	}
	b, found, err := a.Catalogue.Build(ctx, in.Module, in.Commit)
	switch {
	case errors.Is(err, catalogue.ErrAmbiguousCommit):
		return mesh.Rejection{}, temporal.NewNonRetryableApplicationError(err.Error(), meshapi.ErrInvalidInput, err)
	case err != nil:
		return mesh.Rejection{}, fmt.Errorf("find build of %s at %s: %w", in.Module, in.Commit, err)
	case !found:
		msg := fmt.Sprintf("no build of %s at commit %s in the catalogue (starter build list --module %s shows them)", in.Module, in.Commit, in.Module)
		return mesh.Rejection{}, temporal.NewNonRetryableApplicationError(msg, meshapi.ErrUnknownBuild, nil)
	}
	r, err := a.Catalogue.Reject(ctx, b.Module, b.Commit, meshapi.Who(in.By, in.Client), in.Reason)
	switch {
	case errors.Is(err, catalogue.ErrUnknownBuild):
		return mesh.Rejection{}, temporal.NewNonRetryableApplicationError(err.Error(), meshapi.ErrUnknownBuild, err)
	case err != nil:
		return mesh.Rejection{}, err
	}
	a.Log.Warn().Str("module", r.Module).Str("commit", r.Commit).Str("digest", r.Digest).
		Str("by", r.By).Str("reason", r.Reason).Msg("build rejected")
	a.announceRejection(ctx, r)
	return r, nil
}

// ListBuilds answers the module's builds from the catalogue with, for each,
// the machines whose hosts report it running and healthy now. Hosts are
// asked at once, each for at most HostAskTimeout; one that does not answer
// is named in the result rather than failing it.
func (a *Activities) ListBuilds(ctx context.Context, in meshapi.BuildsInput) (meshapi.BuildsResult, error) {
	if err := a.knownModule(in.Module); err != nil {
		return meshapi.BuildsResult{}, err
	}
	entries, err := a.Catalogue.Builds(ctx, in.Module, in.Limit)
	if err != nil {
		return meshapi.BuildsResult{}, fmt.Errorf("list builds of %s: %w", in.Module, err)
	}
	targets, err := a.Mesh.Current().Targets(in.Module)
	if err != nil {
		return meshapi.BuildsResult{}, err
	}
	res := meshapi.BuildsResult{Module: in.Module, Builds: []meshapi.BuildInfo{}, AskedAt: time.Now().UTC()}
	machines := make([]string, len(targets))
	for i, t := range targets {
		machines[i] = t.Machine
	}
	slices.Sort(machines) // so that each list below is sorted
	answers := a.runningOnAll(ctx, in.Module, machines)
	running, healthy := map[string][]string{}, map[string][]string{}
	for _, m := range machines {
		switch ans := answers[m]; {
		case ans.err != nil:
			if res.Unreachable == nil {
				res.Unreachable = map[string]string{}
			}
			res.Unreachable[m] = ans.err.Error()
		case ans.rc != nil:
			running[ans.rc.Digest] = append(running[ans.rc.Digest], m)
			if ans.rc.Healthy() {
				healthy[ans.rc.Digest] = append(healthy[ans.rc.Digest], m)
			}
		}
	}
	for _, e := range entries {
		d := e.Build.Digest
		res.Builds = append(res.Builds, meshapi.BuildInfo{
			Build: e.Build, Plan: e.Plan, BuiltAt: e.BuiltAt, Converged: e.Converged,
			Running: running[d], Healthy: healthy[d], Rejected: e.Rejected,
		})
	}
	return res, nil
}

// hostAnswer is what one machine's host said of a module: the container
// (nil when it runs none), or why it could not be asked.
type hostAnswer struct {
	rc  *mesh.RunningContainer
	err error
}

// runningOnAll asks the machines' hosts at once what each runs of module
// (reportsOf), so that one slow host costs its own wait only.
func (a *Activities) runningOnAll(ctx context.Context, module string, machines []string) map[string]hostAnswer {
	answers := make(map[string]hostAnswer, len(machines))
	for m, r := range a.reportsOf(ctx, machines) {
		answers[m] = hostAnswer{err: r.err}
		if rc, ok := r.rep.Running(module); r.err == nil && ok {
			answers[m] = hostAnswer{rc: &rc}
		}
	}
	return answers
}

// hostReport is one machine's host report, or why it could not be read.
type hostReport struct {
	rep mesh.Report
	err error
}

// reportsOf asks the machines' hosts at once for their reports, each
// bounded by HostAskTimeout.
func (a *Activities) reportsOf(ctx context.Context, machines []string) map[string]hostReport {
	reports := make(map[string]hostReport, len(machines))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range machines {
		wg.Go(func() {
			rep, err := a.reportOf(ctx, m)
			mu.Lock()
			defer mu.Unlock()
			reports[m] = hostReport{rep: rep, err: err}
		})
	}
	wg.Wait()
	return reports
}

// reportOf is machine's host report, asked within HostAskTimeout.
func (a *Activities) reportOf(ctx context.Context, machine string) (mesh.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, HostAskTimeout)
	defer cancel()
	hc, err := a.Hosts.Host(machine)
	if err != nil {
		return mesh.Report{}, err
	}
	return hc.Report(ctx)
}

// runningOn is the module's container as machine's host reports it; nil
// when the host runs no such module.
func (a *Activities) runningOn(ctx context.Context, machine, module string) (*mesh.RunningContainer, error) {
	rep, err := a.reportOf(ctx, machine)
	if err != nil {
		return nil, err
	}
	if rc, ok := rep.Running(module); ok {
		return &rc, nil
	}
	return nil, nil
}

// knownModule refuses, for good, a module the worker's mesh config lacks:
// the one refusal every activity given a module gives, naming the known.
func (a *Activities) knownModule(module string) error {
	cfg := a.Mesh.Current()
	if _, ok := cfg.Modules[module]; !ok {
		return permanent(meshapi.ErrUnknownModule, "module %q is not in the worker's mesh config (known: %v)", module, cfg.ModuleNames())
	}
	return nil
}

// left says, in the words a plan shows, that machine has left the mesh
// config in force (an operator removed it while the worker runs): a push
// still queued for it is skipped, not failed, and nothing is sent to its
// host. Empty while the config names it.
func (a *Activities) left(machine string) string {
	if _, ok := a.Mesh.Current().Machines[machine]; ok {
		return ""
	}
	return fmt.Sprintf("skipped: machine %s left the mesh config before its push; nothing was sent to it", machine)
}

// knownMachine is the machine's config, or knownModule's refusal for a
// machine the worker's mesh config lacks.
func (a *Activities) knownMachine(machine string) (config.Machine, error) {
	cfg := a.Mesh.Current()
	m, ok := cfg.Machines[machine]
	if !ok {
		return config.Machine{}, permanent(meshapi.ErrUnknownMachine, "machine %q is not in the worker's mesh config (known: %v)", machine, cfg.MachineNames())
	}
	return m, nil
}
