package activities

import (
	"strings"
	"testing"
	"time"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/window"
)

func TestHoldsFreezesByScope(t *testing.T) {
	ctx := t.Context()
	cat := catalogue.NewMemory()
	a := &Activities{Catalogue: cat}
	in := meshapi.HoldsInput{Module: "host", Machines: []string{"edge-1", "edge-2"}}
	check := func(name string, in meshapi.HoldsInput, wantIDs []int64, wantWhy string) {
		t.Helper()
		res, err := a.Holds(ctx, in)
		if err != nil {
			t.Fatalf("%s: Holds: %v", name, err)
		}
		var ids []int64
		for _, f := range res.Frozen {
			ids = append(ids, f.ID)
		}
		if len(ids) != len(wantIDs) || (len(ids) > 0 && ids[0] != wantIDs[0]) || res.Why != wantWhy || res.WindowOpensAt != nil {
			t.Fatalf("%s: Holds = %+v; want freezes %v, why %q", name, res, wantIDs, wantWhy)
		}
	}
	check("nothing frozen", in, nil, "")
	for _, f := range [][2]string{{"metrics", ""}, {"", "control-node"}, {"host", "control-node"}} {
		if _, err := cat.Freeze(ctx, f[0], f[1], "bob", "elsewhere"); err != nil {
			t.Fatal(err)
		}
	}
	check("other scopes", in, nil, "")
	m, err := cat.Freeze(ctx, "", "edge-2", "alice", "disk swap")
	if err != nil {
		t.Fatal(err)
	}
	check("a machine of the batch", in, []int64{m.ID}, "held: freeze by alice: disk swap")
	all, err := cat.Freeze(ctx, "", "", "carol", "release week")
	if err != nil {
		t.Fatal(err)
	}
	check("and the whole mesh", in, []int64{m.ID, all.ID}, "held: freeze by alice: disk swap (and 1 more freeze)")
	check("a rollback passes", meshapi.HoldsInput{Module: "host", Machines: in.Machines, Rollback: true}, nil, "")
	check("an override passes", meshapi.HoldsInput{Module: "host", Machines: in.Machines, OverrideFreeze: true}, nil, "")
}

func TestHoldsOutsideWindow(t *testing.T) {
	deny, err := window.New(true, "0 18 * * FRI", 62*time.Hour, "Europe/Berlin", "weekend")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC) // a Saturday
	a := &Activities{Catalogue: catalogue.NewMemory(), Windows: window.Set{deny}, Clock: func() time.Time { return now }}
	res, err := a.Holds(t.Context(), meshapi.HoldsInput{Module: "host", Machines: []string{"edge-1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 12, 7, 7, 0, 0, 0, time.UTC) // Monday 08:00 in Berlin
	if res.WindowOpensAt == nil || !res.WindowOpensAt.Equal(want) {
		t.Fatalf("WindowOpensAt = %v; want %v", res.WindowOpensAt, want)
	}
	if !strings.HasPrefix(res.Why, "held: outside window, opens at 2026-12-07T07:00:00Z") || !strings.Contains(res.Why, "weekend") {
		t.Fatalf("Why = %q", res.Why)
	}
	res, err = a.Holds(t.Context(), meshapi.HoldsInput{Module: "host", Rollback: true})
	if err != nil || res.Why != "" {
		t.Fatalf("a rollback: %+v, %v; want no hold", res, err)
	}
	now = want
	if res, err := a.Holds(t.Context(), meshapi.HoldsInput{Module: "host"}); err != nil || res.Why != "" {
		t.Fatalf("when the window closes: %+v, %v; want no hold", res, err)
	}
}
