package meshapi

import "github.com/meshroll/meshroll/internal/mesh"

// RebuildWorkflowType is the lever that rebuilds a lost catalogue from what
// the hosts run (starter catalogue rebuild).
const RebuildWorkflowType = "RebuildCatalogue"

// RebuildID is the catalogue rebuild's workflow ID: one for the mesh, so
// that two operators asking at once share one run and its answer.
func RebuildID() string { return "catalogue-rebuild" }

// RebuildInput asks for the catalogue to be rebuilt from the hosts.
type RebuildInput struct {
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
	// Client: see ApproveInput.
	Client string `json:"client,omitempty"`
}

// Validate is what the CLI and the workflow both refuse: a rebuild says
// who asked.
func (in RebuildInput) Validate() error {
	return required("a catalogue rebuild", "by", in.By)
}

// RebuildClaim is one build as the hosts claim it: a module's commit and
// the digest they run for it, and which machines run it (Healthy: those
// whose host judges it healthy). Hosts that run one commit under two
// digests make two claims; at most one can be verified.
type RebuildClaim struct {
	Module   string   `json:"module"`
	Commit   string   `json:"commit"`
	Digest   string   `json:"digest"`
	Machines []string `json:"machines"`
	Healthy  []string `json:"healthy,omitempty"`
}

// RebuildClaims is what the rebuild found on the hosts: the claims to
// verify, the containers it cannot verify without building (no commit, a
// module the mesh lacks), and the hosts it could not ask.
type RebuildClaims struct {
	Claims []RebuildClaim `json:"claims"`
	// Unverifiable are claims refused before any build, each with why.
	Unverifiable []RebuildVerdict `json:"unverifiable,omitempty"`
	// Unreachable maps a machine to why its host could not be asked.
	Unreachable map[string]string `json:"unreachable,omitempty"`
}

// RebuildVerdict is a claim and what the rebuild made of it: verified,
// with the build it rebuilt and recorded, or not, with why.
type RebuildVerdict struct {
	Claim    RebuildClaim `json:"claim"`
	Verified bool         `json:"verified"`
	// Build is the build recorded, for a verified claim.
	Build *mesh.Build `json:"build,omitempty"`
	// Reason says why a claim was not verified.
	Reason string `json:"reason,omitempty"`
}

// RebuildResult is the whole rebuild: what was verified and recorded,
// what was not (never trusted), and which hosts were not asked.
type RebuildResult struct {
	Verified    []RebuildVerdict  `json:"verified"`
	Unverified  []RebuildVerdict  `json:"unverified"`
	Unreachable map[string]string `json:"unreachable,omitempty"`
}

// Complete says whether every host was asked and every claim verified.
func (r RebuildResult) Complete() bool {
	return len(r.Unverified) == 0 && len(r.Unreachable) == 0
}
