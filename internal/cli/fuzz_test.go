package cli

import (
	"strings"
	"testing"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// FuzzMergeRequest throws arbitrary merge requests (module, commit, gate)
// at the check the starter makes before it connects. A request it accepts
// names a module of the mesh, a full commit and a real tier, and makes a
// plan ID that is safe as a workflow ID; anything else is refused with an
// error that names what was wrong. Nothing panics.
func FuzzMergeRequest(f *testing.F) {
	f.Add("host", strings.Repeat("a", 40), 1)
	f.Add("../etc/passwd", strings.Repeat("a", 40), 1)
	f.Add("host", "abc", 1)
	f.Add("host", strings.Repeat("A", 40), 2)
	f.Add("host", strings.Repeat("a", 40)+"\n", 2)
	f.Add("mesh-controller", strings.Repeat("f", 64), 7)
	f.Add("", "", -1)
	cfg, err := config.Parse("mesh.yaml", []byte(meshYAML))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, module, commit string, gate int) {
		in, err := planInput(cfg, "mesh.yaml", mergeOpts{module: module, commit: commit, gates: []int{gate}})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("refusal without a message")
			}
			return
		}
		if _, ok := cfg.Modules[in.Module]; !ok {
			t.Fatalf("accepted unknown module %q", in.Module)
		}
		if mesh.ValidCommit(in.Commit) != nil {
			t.Fatalf("accepted commit %q", in.Commit)
		}
		id := meshapi.PlanID(in.Module, in.Commit)
		if strings.Count(id, "/") != 2 || strings.Contains(id, "..") || strings.ContainsAny(id, " \n\t") {
			t.Fatalf("plan ID %q is not a clean plan/<module>/<commit>", id)
		}
	})
}
