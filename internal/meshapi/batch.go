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
