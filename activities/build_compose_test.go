package activities

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// fixedBuilder builds b for any request, or fails with err.
type fixedBuilder struct {
	b   mesh.Build
	err error
}

func (f fixedBuilder) Build(context.Context, build.Request) (mesh.Build, error) { return f.b, f.err }

func buildCompose(f *pushFixture, b build.Builder) (meshapi.BuildComposeResult, error) {
	f.acts.Mesh = &config.Config{Modules: map[string]config.Module{"host": {Repo: "/repo"}}}
	f.acts.Builder = b
	return execute[meshapi.BuildComposeResult](f.t, f.env, f.acts.BuildAndCompose, meshapi.BuildComposeInput{
		Build:   meshapi.BuildInput{Plan: "plan/host/x", Module: "host", Commit: bld("host", 7).Commit},
		Targets: []meshapi.Target{{Machine: "control-node", Tier: 1, Modules: []string{"host"}}},
	})
}

// BuildAndCompose records the build and composes the targets with it.
func TestBuildAndComposeRecordsAndComposes(t *testing.T) {
	f := newPushFixture(t)
	host7 := bld("host", 7)
	res, err := buildCompose(f, fixedBuilder{b: host7})
	require.NoError(t, err)
	require.Equal(t, host7.Digest, res.Build.Digest)
	require.NotNil(t, res.Composed)
	require.Empty(t, res.ComposeError)
	require.Len(t, res.Composed.Results, 1)
	c, ok := res.Composed.Results[0].Declaration.Container("host")
	require.True(t, ok)
	require.Equal(t, host7.Digest, c.Digest, "composed with the build it made")
	_, found, err := f.cat.Lookup(context.Background(), host7.Digest)
	require.NoError(t, err)
	require.True(t, found, "the build is in the catalogue")
}

// A host that cannot be reached fails the composition, not the activity:
// the build is done and recorded, and the plan composes again by
// ComposeTargets, under that activity's retries.
func TestBuildAndComposeLeavesATransientComposeFailureToThePlan(t *testing.T) {
	f := newPushFixture(t)
	f.host.SetDown(true)
	host7 := bld("host", 7)
	res, err := buildCompose(f, fixedBuilder{b: host7})
	require.NoError(t, err)
	require.Equal(t, host7.Digest, res.Build.Digest)
	require.Nil(t, res.Composed)
	require.Contains(t, res.ComposeError, "control-node")
	_, found, err := f.cat.Lookup(context.Background(), host7.Digest)
	require.NoError(t, err)
	require.True(t, found, "the build is in the catalogue")
}

// A build that fails fails the activity, permanently for a compile error,
// as Build does.
func TestBuildAndComposeFailsWithTheBuild(t *testing.T) {
	f := newPushFixture(t)
	_, err := buildCompose(f, fixedBuilder{err: &build.PermanentError{Err: errors.New("main.go:3: undefined: x")}})
	appErr := requireAppError(t, err, meshapi.ErrBuildFailed)
	require.True(t, appErr.NonRetryable())
}

// A module whose repo is a URL cannot be built (the worker builds from a
// clone on its disk): the build fails at once, naming the key and what to
// set, instead of a git error about a path made of the URL.
func TestBuildOfAURLRepoSaysWhatToSet(t *testing.T) {
	f := newPushFixture(t)
	f.acts.Mesh = &config.Config{Modules: map[string]config.Module{"host": {Repo: "https://git.example.com/org/mesh"}}}
	f.acts.Builder = fixedBuilder{b: bld("host", 7)}
	_, err := f.env.ExecuteActivity(f.acts.Build, meshapi.BuildInput{Plan: "plan/host/x", Module: "host", Commit: bld("host", 7).Commit})
	appErr := requireAppError(t, err, meshapi.ErrBuildFailed)
	require.True(t, appErr.NonRetryable())
	require.Contains(t, appErr.Message(), `modules.host.repo: "https://git.example.com/org/mesh" is a URL`)
	require.Contains(t, appErr.Message(), "set repo to the clone's directory")
}
