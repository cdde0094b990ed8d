package meshapi

import "github.com/meshroll/meshroll/internal/mesh"

// ComposeTargetsInput composes many machines' declarations in one activity,
// so that a plan's history grows by one activity per batch rather than one
// per machine.
type ComposeTargetsInput struct {
	Plan    string     `json:"plan"`
	Targets []Target   `json:"targets"`
	Build   mesh.Build `json:"build"`
}

// ComposeTargetsResult has one entry per target, in the input's order.
type ComposeTargetsResult struct {
	Results []ComposedTarget `json:"results"`
}

// ComposedTarget is one target's composition, or why it could not be
// composed (a permanent failure, such as a machine missing from the
// worker's config; transient failures retry the whole batch).
type ComposedTarget struct {
	ComposeResult
	Error string `json:"error,omitempty"`
}

// BuildComposeInput asks for a build and, in the same activity, the
// composition of a plan's targets with it: one server round trip fewer
// than the two activities, for a plan of at most one compose batch.
type BuildComposeInput struct {
	Build   BuildInput `json:"build"`
	Targets []Target   `json:"targets"`
}

// BuildComposeResult is the build and its composition. A composition that
// failed transiently is left to the plan's own compose activity, which
// retries it for the push policy's budget: Composed is then nil and
// ComposeError says why.
type BuildComposeResult struct {
	Build        mesh.Build            `json:"build"`
	Composed     *ComposeTargetsResult `json:"composed,omitempty"`
	ComposeError string                `json:"compose_error,omitempty"`
}
