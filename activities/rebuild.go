package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// RebuildClaims asks every machine's host what it runs and gathers the
// containers into claims, one per module, commit and digest, with the
// machines that run each. A container whose commit is not reported, or
// whose module the mesh config lacks, cannot be rebuilt: it is returned
// as unverifiable, with why. A host that does not answer is named.
func (a *Activities) RebuildClaims(ctx context.Context, in meshapi.RebuildInput) (meshapi.RebuildClaims, error) {
	out := meshapi.RebuildClaims{Claims: []meshapi.RebuildClaim{}, Unreachable: map[string]string{}}
	type key struct{ module, commit, digest string }
	claims := map[key]*meshapi.RebuildClaim{}
	machines := a.Mesh.Current().MachineNames()
	reports := a.reportsOf(ctx, machines)
	for _, machine := range machines {
		r := reports[machine]
		if r.err != nil {
			out.Unreachable[machine] = r.err.Error()
			continue
		}
		for _, rc := range r.rep.Containers {
			k := key{rc.Module, rc.Commit, rc.Digest}
			c, ok := claims[k]
			if !ok {
				c = &meshapi.RebuildClaim{Module: rc.Module, Commit: rc.Commit, Digest: rc.Digest}
				claims[k] = c
			}
			c.Machines = append(c.Machines, machine)
			if rc.Healthy() {
				c.Healthy = append(c.Healthy, machine)
			}
		}
	}
	for _, c := range claims {
		switch {
		case c.Commit == "":
			out.Unverifiable = append(out.Unverifiable, meshapi.RebuildVerdict{Claim: *c,
				Reason: "the host reports no commit for it (declared by hand, or by an agent too old to report one): there is nothing to rebuild"})
		case a.knownModule(c.Module) != nil:
			out.Unverifiable = append(out.Unverifiable, meshapi.RebuildVerdict{Claim: *c,
				Reason: fmt.Sprintf("module %s is not in the worker's mesh config: there is no repository to rebuild it from", c.Module)})
		default:
			out.Claims = append(out.Claims, *c)
		}
	}
	slices.SortFunc(out.Claims, compareClaims)
	slices.SortFunc(out.Unverifiable, func(x, y meshapi.RebuildVerdict) int { return compareClaims(x.Claim, y.Claim) })
	a.Log.Info().Int("claims", len(out.Claims)).Int("unverifiable", len(out.Unverifiable)).Int("unreachable", len(out.Unreachable)).
		Str("by", in.By).Msg("catalogue rebuild: the hosts' claims gathered")
	return out, nil
}

func compareClaims(x, y meshapi.RebuildClaim) int {
	return cmp.Or(cmp.Compare(x.Module, y.Module), cmp.Compare(x.Commit, y.Commit), cmp.Compare(x.Digest, y.Digest))
}

// RebuildBuild verifies one claim: it builds the module at the claimed
// commit and, only when the build's digest is the one the hosts run,
// records the build and marks it converged on the machines that run it
// healthy. Builds are reproducible, so a digest that differs means the
// hosts run something no commit of the repository makes: it is named and
// never trusted. A build that cannot succeed is a verdict too; one that
// may (a fetch, a registry away) is retried.
func (a *Activities) RebuildBuild(ctx context.Context, c meshapi.RebuildClaim) (meshapi.RebuildVerdict, error) {
	v := meshapi.RebuildVerdict{Claim: c}
	b, err := a.buildOnly(ctx, meshapi.BuildInput{Plan: meshapi.RebuildID(), Module: c.Module, Commit: c.Commit})
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr) && appErr.NonRetryable():
		v.Reason = "rebuilding it failed: " + appErr.Message()
		return v, nil
	case err != nil:
		return v, err
	case b.Digest != c.Digest:
		v.Reason = fmt.Sprintf("commit %s rebuilds to %s, not to the %s the hosts run: not trusted", mesh.ShortCommit(c.Commit), b.Digest, c.Digest)
		a.Log.Warn().Str("module", c.Module).Str("commit", c.Commit).Str("digest", c.Digest).Str("rebuilt", b.Digest).
			Strs("machines", c.Machines).Msg("catalogue rebuild: a host runs a digest its commit does not rebuild to")
		return v, nil
	}
	if err := a.Catalogue.Record(ctx, b, meshapi.RebuildID()); err != nil {
		if errors.Is(err, catalogue.ErrNotReproducible) {
			v.Reason = err.Error()
			return v, nil
		}
		return v, fmt.Errorf("record build: %w", err)
	}
	for _, m := range c.Healthy {
		if err := a.Catalogue.MarkConverged(ctx, b.Digest, m); err != nil {
			return v, fmt.Errorf("mark %s converged on %s: %w", mesh.ShortDigest(b.Digest), m, err)
		}
	}
	a.Log.Info().Str("module", c.Module).Str("commit", c.Commit).Str("digest", b.Digest).Int64("generation", b.Generation).
		Strs("machines", c.Machines).Msg("catalogue rebuild: build verified and recorded")
	v.Verified, v.Build = true, &b
	return v, nil
}
