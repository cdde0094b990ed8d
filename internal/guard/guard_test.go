package guard

import (
	"errors"
	"fmt"
	"testing"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

func dg(n int) string { return fmt.Sprintf("sha256:%064x", n) }

// catalogue: digest n has generation n.
func lookup(unknown ...int) Lookup {
	return func(d string) (int64, bool, error) {
		var n int
		if _, err := fmt.Sscanf(d, "sha256:%x", &n); err != nil {
			return 0, false, err
		}
		for _, u := range unknown {
			if u == n {
				return 0, false, nil
			}
		}
		return int64(n), true, nil
	}
}

// rejected: the digests numbered ns were rejected by an operator.
func rejected(ns ...int) func(string) (string, bool, error) {
	return func(d string) (string, bool, error) {
		for _, n := range ns {
			if d == dg(n) {
				return "rejected by ops: crashes under load", true, nil
			}
		}
		return "", false, nil
	}
}

func ctr(module string, n int) mesh.Container {
	return mesh.Container{Module: module, Digest: dg(n), Generation: int64(n)}
}

func run(module string, n int) mesh.RunningContainer {
	return mesh.RunningContainer{Module: module, Digest: dg(n), Generation: int64(n), State: mesh.StateRunning}
}

// floors is a Floor of the given generations (digest n has generation n).
func floors(gens map[string]int) map[string]mesh.Container {
	if gens == nil {
		return nil
	}
	f := map[string]mesh.Container{}
	for m, n := range gens {
		f[m] = ctr(m, n)
	}
	return f
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name     string
		decl     []mesh.Container
		running  []mesh.RunningContainer
		unknown  []int
		floor    map[string]int // module -> generation (and digest) known healthy there
		force    bool
		rejected []int // digest numbers an operator rejected
		rollback bool
		from     int // a put-back's build (digest number), 0 for none
		remove   bool
		want     Decision
		code     string
		rebased  []string
		wantSent map[string]int // module -> digest number sent
	}{
		{
			name:     "newer own build is sent",
			decl:     []mesh.Container{ctr("host", 5), ctr("ctl", 3)},
			running:  []mesh.RunningContainer{run("host", 4), run("ctl", 3)},
			want:     Send,
			wantSent: map[string]int{"host": 5, "ctl": 3},
		},
		{
			name:    "older own build is superseded",
			decl:    []mesh.Container{ctr("host", 4)},
			running: []mesh.RunningContainer{run("host", 5)},
			want:    Superseded,
		},
		{
			name:     "forced older own build is sent",
			decl:     []mesh.Container{ctr("host", 4)},
			running:  []mesh.RunningContainer{run("host", 5)},
			force:    true,
			want:     Send,
			wantSent: map[string]int{"host": 4},
		},
		{
			// The 2026-10-02 race: the host plan carries the controller it
			// saw when composed; a newer controller runs now.
			name:     "stale other container is rebased onto what runs",
			decl:     []mesh.Container{ctr("host", 7), ctr("mesh-controller", 10)},
			running:  []mesh.RunningContainer{run("host", 6), run("mesh-controller", 11)},
			want:     Send,
			rebased:  []string{"mesh-controller"},
			wantSent: map[string]int{"host": 7, "mesh-controller": 11},
		},
		{
			name:     "other container never rides along newer than it runs",
			decl:     []mesh.Container{ctr("host", 7), ctr("ctl", 12)},
			running:  []mesh.RunningContainer{run("host", 6), run("ctl", 11)},
			want:     Send,
			rebased:  []string{"ctl"},
			wantSent: map[string]int{"host": 7, "ctl": 11},
		},
		{
			name:     "module the machine lacks keeps the composed build",
			decl:     []mesh.Container{ctr("host", 7), ctr("ctl", 3)},
			running:  []mesh.RunningContainer{run("host", 6)},
			want:     Send,
			wantSent: map[string]int{"host": 7, "ctl": 3},
		},
		{
			name:     "running module missing from the declaration is kept",
			decl:     []mesh.Container{ctr("host", 7)},
			running:  []mesh.RunningContainer{run("host", 6), run("ctl", 9)},
			want:     Send,
			wantSent: map[string]int{"host": 7, "ctl": 9},
		},
		{
			name:    "exactly what runs is not sent again",
			decl:    []mesh.Container{ctr("host", 7), ctr("ctl", 9)},
			running: []mesh.RunningContainer{run("host", 7), run("ctl", 9)},
			want:    AlreadyRunning,
		},
		{
			name:    "unknown running digest is refused",
			decl:    []mesh.Container{ctr("host", 7)},
			running: []mesh.RunningContainer{run("host", 6), run("ctl", 99)},
			unknown: []int{99},
			want:    Refused,
			code:    meshapi.ErrUnknownDigest,
		},
		{
			name:     "unknown running digest passes when forced",
			decl:     []mesh.Container{ctr("host", 7)},
			running:  []mesh.RunningContainer{run("host", 99)},
			unknown:  []int{99},
			force:    true,
			want:     Send,
			wantSent: map[string]int{"host": 7},
		},
		{
			name: "declaration without the plan's module is refused",
			decl: []mesh.Container{ctr("ctl", 7)},
			want: Refused,
			code: meshapi.ErrInvalidInput,
		},
		{
			name:     "first push to an empty machine",
			decl:     []mesh.Container{ctr("host", 1)},
			want:     Send,
			wantSent: map[string]int{"host": 1},
		},
		{
			// The amnesia case: the control node's agent came back empty;
			// the held plan composed controller 1, controller 3 ran healthy.
			name:     "a host that lost its state is given back its floor, not the stale composed copy",
			decl:     []mesh.Container{ctr("host", 7), ctr("mesh-controller", 1)},
			running:  nil,
			floor:    map[string]int{"mesh-controller": 3},
			want:     Send,
			rebased:  []string{"mesh-controller"},
			wantSent: map[string]int{"host": 7, "mesh-controller": 3},
		},
		{
			name:     "a host reporting an older container than its floor is lifted to the floor",
			decl:     []mesh.Container{ctr("host", 7), ctr("mesh-controller", 1)},
			running:  []mesh.RunningContainer{run("mesh-controller", 2)},
			floor:    map[string]int{"mesh-controller": 3},
			want:     Send,
			rebased:  []string{"mesh-controller"},
			wantSent: map[string]int{"host": 7, "mesh-controller": 3},
		},
		{
			name:     "an undeclared running module below its floor is lifted too",
			decl:     []mesh.Container{ctr("host", 7)},
			running:  []mesh.RunningContainer{run("metrics", 2)},
			floor:    map[string]int{"metrics": 4},
			want:     Send,
			rebased:  []string{"metrics"},
			wantSent: map[string]int{"host": 7, "metrics": 4},
		},
		{
			name:    "the own build below its floor is superseded, though the host runs nothing",
			decl:    []mesh.Container{ctr("host", 4)},
			running: nil,
			floor:   map[string]int{"host": 5},
			want:    Superseded,
		},
		{
			name:     "a floor below what runs changes nothing",
			decl:     []mesh.Container{ctr("host", 7), ctr("mesh-controller", 3)},
			running:  []mesh.RunningContainer{run("mesh-controller", 3)},
			floor:    map[string]int{"mesh-controller": 2, "host": 6},
			want:     Send,
			wantSent: map[string]int{"host": 7, "mesh-controller": 3},
		},
		{
			name:     "a rejected own build is never sent",
			decl:     []mesh.Container{ctr("host", 5), ctr("ctl", 3)},
			running:  []mesh.RunningContainer{run("host", 4), run("ctl", 3)},
			rejected: []int{5},
			want:     Refused,
			code:     meshapi.ErrRejected,
		},
		{
			name:     "not even forced",
			decl:     []mesh.Container{ctr("host", 5)},
			running:  []mesh.RunningContainer{run("host", 4)},
			rejected: []int{5},
			force:    true,
			want:     Refused,
			code:     meshapi.ErrRejected,
		},
		{
			name:     "a rejected build composed for a machine that lacks the module is not sent",
			decl:     []mesh.Container{ctr("host", 5), ctr("ctl", 3)},
			running:  []mesh.RunningContainer{run("host", 4)},
			rejected: []int{3},
			want:     Refused,
			code:     meshapi.ErrRejected,
		},
		{
			name:     "nor one a lost host's floor would lift it to",
			decl:     []mesh.Container{ctr("host", 5), ctr("ctl", 2)},
			floor:    map[string]int{"ctl": 3},
			rejected: []int{3},
			want:     Refused,
			code:     meshapi.ErrRejected,
			rebased:  []string{"ctl"},
		},
		{
			name:     "a rejected build the machine runs is kept: a rejection never pushes by itself",
			decl:     []mesh.Container{ctr("host", 5), ctr("ctl", 2)},
			running:  []mesh.RunningContainer{run("host", 4), run("ctl", 3)},
			rejected: []int{3, 4},
			want:     Send,
			rebased:  []string{"ctl"},
			wantSent: map[string]int{"host": 5, "ctl": 3},
		},
		{
			name:     "a rollback takes its own module below what runs and below the floor",
			decl:     []mesh.Container{ctr("host", 2), ctr("ctl", 3)},
			running:  []mesh.RunningContainer{run("host", 4), run("ctl", 3)},
			floor:    map[string]int{"host": 4, "ctl": 3},
			rollback: true,
			want:     Send,
			wantSent: map[string]int{"host": 2, "ctl": 3},
		},
		{
			name:     "but never another module's",
			decl:     []mesh.Container{ctr("host", 2), ctr("ctl", 1)},
			running:  []mesh.RunningContainer{run("host", 4), run("ctl", 3)},
			rollback: true,
			want:     Send,
			rebased:  []string{"ctl"},
			wantSent: map[string]int{"host": 2, "ctl": 3},
		},
		{
			name:     "a machine already below the rollback's build is left as it runs",
			decl:     []mesh.Container{ctr("host", 3)},
			running:  []mesh.RunningContainer{run("host", 2)},
			rollback: true,
			want:     Superseded,
		},
		{
			name:     "a rollback to a rejected build is refused",
			decl:     []mesh.Container{ctr("host", 2)},
			running:  []mesh.RunningContainer{run("host", 4)},
			rollback: true,
			rejected: []int{2},
			want:     Refused,
			code:     meshapi.ErrRejected,
		},
		{
			name:     "a put-back takes the machine off the failed build, below its floor",
			decl:     []mesh.Container{ctr("host", 6)},
			running:  []mesh.RunningContainer{run("host", 7)},
			floor:    map[string]int{"host": 7},
			rollback: true,
			from:     7,
			want:     Send,
			wantSent: map[string]int{"host": 6},
		},
		{
			name:     "a put-back leaves a machine a newer build reached since",
			decl:     []mesh.Container{ctr("host", 6)},
			running:  []mesh.RunningContainer{run("host", 8)},
			rollback: true,
			from:     7,
			want:     Superseded,
		},
		{
			name:     "a put-back leaves a machine that no longer runs the module",
			decl:     []mesh.Container{ctr("host", 6)},
			running:  []mesh.RunningContainer{run("ctl", 3)},
			rollback: true,
			from:     7,
			want:     Superseded,
		},
		{
			name:     "a sync that stops a module sends the rest as it runs, without it",
			decl:     []mesh.Container{ctr("host", 4), ctr("ctl", 2)},
			running:  []mesh.RunningContainer{run("host", 4), run("ctl", 3)},
			floor:    map[string]int{"host": 4},
			remove:   true,
			want:     Send,
			rebased:  []string{"ctl"},
			wantSent: map[string]int{"ctl": 3},
		},
		{
			name:     "a removal whose composition left the module out",
			decl:     []mesh.Container{ctr("ctl", 3)},
			running:  []mesh.RunningContainer{run("host", 4), run("ctl", 3)},
			remove:   true,
			want:     Send,
			wantSent: map[string]int{"ctl": 3},
		},
		{
			name:     "forced, the floor is not applied",
			decl:     []mesh.Container{ctr("host", 4), ctr("mesh-controller", 1)},
			floor:    map[string]int{"host": 5, "mesh-controller": 3},
			force:    true,
			want:     Send,
			wantSent: map[string]int{"host": 4, "mesh-controller": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{
				Declaration: mesh.Declaration{Machine: "m1", Plan: "p", Containers: tt.decl},
				Module:      "host",
				Report:      mesh.Report{Machine: "m1", Containers: tt.running},
				Lookup:      lookup(tt.unknown...),
				Force:       tt.force,
				Floor:       floors(tt.floor),
				Rejected:    rejected(tt.rejected...),
				Rollback:    tt.rollback,
				Remove:      tt.remove,
			}
			if tt.from != 0 {
				in.RollbackFrom = dg(tt.from)
			}
			got, err := Check(in)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if got.Decision != tt.want {
				t.Fatalf("decision = %s (%s), want %s", got.Decision, got.Reason, tt.want)
			}
			if got.Code != tt.code {
				t.Errorf("code = %q, want %q", got.Code, tt.code)
			}
			if fmt.Sprint(got.Rebased) != fmt.Sprint(tt.rebased) && !(len(got.Rebased) == 0 && len(tt.rebased) == 0) {
				t.Errorf("rebased = %v, want %v", got.Rebased, tt.rebased)
			}
			if got.Decision != Send && got.Decision != AlreadyRunning && got.Reason == "" {
				t.Errorf("decision %s without a reason", got.Decision)
			}
			if tt.wantSent != nil {
				if len(got.Declaration.Containers) != len(tt.wantSent) {
					t.Fatalf("sent %d containers, want %d: %+v", len(got.Declaration.Containers), len(tt.wantSent), got.Declaration.Containers)
				}
				for m, n := range tt.wantSent {
					c, ok := got.Declaration.Container(m)
					if !ok || c.Digest != dg(n) || c.Generation != int64(n) {
						t.Errorf("sent %s = %+v, want digest %d generation %d", m, c, n, n)
					}
				}
			}
		})
	}
}

// TestCheckNeverDowngrades walks every combination of small generations,
// with and without a floor, and asserts the invariant directly: whatever is
// sent, no container goes below what runs, nor below its floor, unless
// forced.
func TestCheckNeverDowngrades(t *testing.T) {
	for own := 1; own <= 4; own++ {
		for ownRun := 0; ownRun <= 4; ownRun++ {
			for other := 1; other <= 4; other++ {
				for otherRun := 0; otherRun <= 4; otherRun++ {
					for floor := 0; floor <= 4; floor++ {
						var running []mesh.RunningContainer
						if ownRun > 0 {
							running = append(running, run("host", ownRun))
						}
						if otherRun > 0 {
							running = append(running, run("ctl", otherRun+10))
						}
						in := Input{
							Declaration: mesh.Declaration{Machine: "m1", Containers: []mesh.Container{ctr("host", own), ctr("ctl", other+10)}},
							Module:      "host",
							Report:      mesh.Report{Containers: running},
							Lookup:      lookup(),
						}
						if floor > 0 {
							in.Floor = map[string]mesh.Container{"host": ctr("host", floor), "ctl": ctr("ctl", floor+10)}
						}
						got, err := Check(in)
						if err != nil {
							t.Fatal(err)
						}
						if got.Decision != Send {
							continue
						}
						for _, c := range got.Declaration.Containers {
							if r, ok := in.Report.Running(c.Module); ok && c.Generation < r.Generation {
								t.Errorf("own=%d/%d other=%d/%d floor=%d: sent %s generation %d below running %d",
									own, ownRun, other, otherRun, floor, c.Module, c.Generation, r.Generation)
							}
							if f, ok := in.Floor[c.Module]; ok && c.Generation < f.Generation {
								t.Errorf("own=%d/%d other=%d/%d floor=%d: sent %s generation %d below its floor %d",
									own, ownRun, other, otherRun, floor, c.Module, c.Generation, f.Generation)
							}
						}
					}
				}
			}
		}
	}
}

func TestCheckLookupError(t *testing.T) {
	boom := errors.New("catalogue down")
	_, err := Check(Input{
		Declaration: mesh.Declaration{Containers: []mesh.Container{ctr("host", 1)}},
		Module:      "host",
		Report:      mesh.Report{Containers: []mesh.RunningContainer{run("host", 1)}},
		Lookup:      func(string) (int64, bool, error) { return 0, false, boom },
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want wrapping %v", err, boom)
	}
}

// A catalogue that cannot say whether a build is rejected fails the check
// (the push is retried): a push that does not know does not send.
func TestCheckRejectedLookupError(t *testing.T) {
	boom := errors.New("catalogue down")
	_, err := Check(Input{
		Declaration: mesh.Declaration{Containers: []mesh.Container{ctr("host", 2)}},
		Module:      "host",
		Report:      mesh.Report{Containers: []mesh.RunningContainer{run("host", 1)}},
		Lookup:      lookup(),
		Rejected:    func(string) (string, bool, error) { return "", false, boom },
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want wrapping %v", err, boom)
	}
}
