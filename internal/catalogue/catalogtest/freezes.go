package catalogtest

import (
	"testing"
	"time"

	"github.com/meshroll/meshroll/internal/catalogue"
)

// freeze freezes module on machine and checks the answer describes it.
func freeze(t *testing.T, c catalogue.Catalogue, module, machine, by, reason string) catalogue.Freeze {
	t.Helper()
	f, err := c.Freeze(t.Context(), module, machine, by, reason)
	if err != nil {
		t.Fatalf("Freeze(%q, %q): %v", module, machine, err)
	}
	if f.ID == 0 || f.Module != module || f.Machine != machine || f.By != by || f.Reason != reason ||
		f.At.IsZero() || f.LiftedAt != nil || f.LiftedBy != "" {
		t.Fatalf("Freeze(%q, %q, %q, %q) = %+v; want it with an ID and a time, active", module, machine, by, reason, f)
	}
	return f
}

// sameFreeze compares every field, times by instant.
func sameFreeze(a, b catalogue.Freeze) bool {
	la, lb := a.LiftedAt, b.LiftedAt
	if (la == nil) != (lb == nil) || (la != nil && !la.Equal(*lb)) {
		return false
	}
	ta, tb := a.At, b.At
	a.At, b.At, a.LiftedAt, b.LiftedAt = time.Time{}, time.Time{}, nil, nil
	return a == b && ta.Equal(tb)
}

// expectFreezes checks Freezes lists want, in order.
func expectFreezes(t *testing.T, c catalogue.Catalogue, want ...catalogue.Freeze) {
	t.Helper()
	got, err := c.Freezes(t.Context())
	if err != nil {
		t.Fatalf("Freezes: %v", err)
	}
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = sameFreeze(got[i], want[i])
	}
	if !ok {
		t.Fatalf("Freezes = %+v; want %+v", got, want)
	}
}

func testFreezeNeedsReason(t *testing.T, c catalogue.Catalogue) {
	for _, reason := range []string{"", " ", "\t\n"} {
		if f, err := c.Freeze(t.Context(), "host", "", "alice", reason); err == nil {
			t.Fatalf("Freeze with reason %q = %+v; want an error", reason, f)
		}
	}
	expectFreezes(t, c)
	// Who froze may be unsaid; why may not.
	f := freeze(t, c, "", "", "", "release week")
	expectFreezes(t, c, f)
}

func testFreezeListed(t *testing.T, c catalogue.Catalogue) {
	expectFreezes(t, c)
	before := time.Now()
	all := freeze(t, c, "", "", "alice", "release week")
	tick()
	mod := freeze(t, c, "host", "", "bob", "incident 42")
	tick()
	mach := freeze(t, c, "", "edge-1", "carol", "disk swap")
	tick()
	both := freeze(t, c, "host", "control-node", "dave", "controller upgrade")
	after := time.Now()
	ids := map[int64]bool{}
	for _, f := range []catalogue.Freeze{all, mod, mach, both} {
		if ids[f.ID] {
			t.Fatalf("two freezes with ID %d", f.ID)
		}
		ids[f.ID] = true
		if f.At.Before(before.Add(-time.Second)) || f.At.After(after.Add(time.Second)) {
			t.Errorf("freeze %d At = %v, want between %v and %v", f.ID, f.At, before, after)
		}
	}
	expectFreezes(t, c, all, mod, mach, both)
}

// testUnfreezeExactScope: unfreezing lifts the freezes of exactly that
// scope, never a wider or narrower one, marks them lifted by whom and when,
// and a second unfreeze finds nothing to lift.
func testUnfreezeExactScope(t *testing.T, c catalogue.Catalogue) {
	all := freeze(t, c, "", "", "alice", "release week")
	mod := freeze(t, c, "host", "", "bob", "incident 42")
	mach := freeze(t, c, "", "edge-1", "carol", "disk swap")
	both := freeze(t, c, "host", "edge-1", "dave", "controller upgrade")
	for _, scope := range [][2]string{{"metrics", ""}, {"", "edge-2"}, {"metrics", "edge-1"}} {
		if got, err := c.Unfreeze(t.Context(), scope[0], scope[1], "erin"); err != nil || len(got) != 0 {
			t.Fatalf("Unfreeze(%q, %q) = %+v, %v; want nothing lifted", scope[0], scope[1], got, err)
		}
	}
	expectFreezes(t, c, all, mod, mach, both)

	before := time.Now()
	got, err := c.Unfreeze(t.Context(), "host", "", "erin")
	after := time.Now()
	if err != nil || len(got) != 1 || got[0].ID != mod.ID || got[0].LiftedBy != "erin" || got[0].LiftedAt == nil {
		t.Fatalf("Unfreeze(host, \"\") = %+v, %v; want freeze %d lifted by erin", got, err, mod.ID)
	}
	if l := *got[0].LiftedAt; l.Before(before.Add(-time.Second)) || l.After(after.Add(time.Second)) {
		t.Errorf("LiftedAt = %v, want between %v and %v", l, before, after)
	}
	if got[0].Reason != mod.Reason || got[0].By != mod.By || !got[0].At.Equal(mod.At) {
		t.Errorf("lifted %+v; want the freeze as taken %+v", got[0], mod)
	}
	expectFreezes(t, c, all, mach, both)
	if again, err := c.Unfreeze(t.Context(), "host", "", "erin"); err != nil || len(again) != 0 {
		t.Fatalf("Unfreeze(host) again = %+v, %v; want nothing lifted", again, err)
	}

	for _, f := range []catalogue.Freeze{both, mach, all} {
		got, err := c.Unfreeze(t.Context(), f.Module, f.Machine, "")
		if err != nil || len(got) != 1 || got[0].ID != f.ID || got[0].LiftedAt == nil {
			t.Fatalf("Unfreeze(%q, %q) = %+v, %v; want freeze %d lifted", f.Module, f.Machine, got, err, f.ID)
		}
	}
	expectFreezes(t, c)
	// Lifted freezes are kept: a new freeze gets a new ID.
	if f := freeze(t, c, "host", "", "bob", "again"); ids(all, mod, mach, both)[f.ID] {
		t.Fatalf("a new freeze reused ID %d", f.ID)
	}
}

func ids(fs ...catalogue.Freeze) map[int64]bool {
	out := map[int64]bool{}
	for _, f := range fs {
		out[f.ID] = true
	}
	return out
}

// testUnfreezeEvery: freezing a scope twice keeps both freezes, each with
// its reason, and one unfreeze lifts both, oldest first.
func testUnfreezeEvery(t *testing.T, c catalogue.Catalogue) {
	a := freeze(t, c, "host", "", "alice", "incident 42")
	tick()
	b := freeze(t, c, "host", "", "bob", "incident 43")
	expectFreezes(t, c, a, b)
	got, err := c.Unfreeze(t.Context(), "host", "", "carol")
	if err != nil || len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID {
		t.Fatalf("Unfreeze(host) = %+v, %v; want %d and %d lifted", got, err, a.ID, b.ID)
	}
	expectFreezes(t, c)
}
