package meshapi

import (
	"errors"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// Workflow types of the levers on builds. Each lever is a short workflow
// on the worker, which owns the catalogue, so that an operator's CLI needs
// only Temporal (as for every other command) and each use of a lever is an
// execution the Web UI lists with its input: who, what and why.
const (
	RejectWorkflowType = "RejectBuild"
	BuildsWorkflowType = "ListBuilds"
)

const (
	rejectPrefix = "reject/"
	buildsPrefix = "builds/"
)

// RejectID is the rejection workflow's ID for a build: made only from module
// and commit, so that the same rejection asked again (a retried CLI, two
// operators) finds the first rather than recording a second.
func RejectID(module, commit string) string { return rejectPrefix + module + "/" + commit }

// BuildsID is the ID of a listing of the module's builds. Listings asked at
// once share one run (and its answer).
func BuildsID(module string) string { return buildsPrefix + module }

// RejectInput asks that a build never be sent again (starter build reject).
type RejectInput struct {
	Module string `json:"module"`
	// Commit is the build's commit, in full or a unique prefix of at least
	// seven characters.
	Commit string `json:"commit"`
	By     string `json:"by"`
	Reason string `json:"reason"`
	// Client: see ApproveInput.
	Client string `json:"client,omitempty"`
}

// Validate is what the CLI and the workflow both refuse before anything
// is recorded: a rejection names its build, who and why.
func (in RejectInput) Validate() error {
	return required("a rejection", "module", in.Module, "commit", in.Commit, "by", in.By, "reason", in.Reason)
}

// required says which of the named values (name, value, name, value...)
// are blank, as what needs them: "a rejection needs by, reason".
func required(what string, namesAndValues ...string) error {
	var missing []string
	for i := 0; i+1 < len(namesAndValues); i += 2 {
		if strings.TrimSpace(namesAndValues[i+1]) == "" {
			missing = append(missing, namesAndValues[i])
		}
	}
	if len(missing) > 0 {
		return errors.New(what + " needs " + strings.Join(missing, " and "))
	}
	return nil
}

// BuildsInput asks for a module's builds (starter build list).
type BuildsInput struct {
	Module string `json:"module"`
	// Limit is how many of the newest to list; 0 is all.
	Limit int `json:"limit,omitempty"`
}

// BuildsResult is a module's builds, newest first, with where each runs
// now by its hosts' own reports.
type BuildsResult struct {
	Module string      `json:"module"`
	Builds []BuildInfo `json:"builds"`
	// Unreachable names the machines whose host could not be asked, with
	// why: their builds are missing from Running and Healthy.
	Unreachable map[string]string `json:"unreachable,omitempty"`
	// AskedAt is when the hosts were asked.
	AskedAt time.Time `json:"asked_at"`
}

// BuildInfo is one build, what the catalogue knows of it and where it runs.
type BuildInfo struct {
	Build   mesh.Build `json:"build"`
	Plan    string     `json:"plan,omitempty"`
	BuiltAt time.Time  `json:"built_at"`
	// Converged names the machines the catalogue saw run it healthy, at
	// any time.
	Converged []string `json:"converged,omitempty"`
	// Running names the machines whose host reports it now, and Healthy
	// those of them that report it healthy (or running, on a host that
	// does not judge health).
	Running  []string        `json:"running,omitempty"`
	Healthy  []string        `json:"healthy,omitempty"`
	Rejected *mesh.Rejection `json:"rejected,omitempty"`
}
