package mesh

import "testing"

func TestFreezeScopeAndHolds(t *testing.T) {
	machines := []string{"edge-1", "edge-2"}
	for _, tc := range []struct {
		f     Freeze
		scope string
		holds bool
	}{
		{Freeze{}, "the whole mesh", true},
		{Freeze{Module: "host"}, "module host", true},
		{Freeze{Module: "metrics"}, "module metrics", false},
		{Freeze{Machine: "edge-2"}, "machine edge-2", true},
		{Freeze{Machine: "control-node"}, "machine control-node", false},
		{Freeze{Module: "host", Machine: "edge-1"}, "module host on machine edge-1", true},
		{Freeze{Module: "metrics", Machine: "edge-1"}, "module metrics on machine edge-1", false},
		{Freeze{Module: "host", Machine: "control-node"}, "module host on machine control-node", false},
	} {
		if got := tc.f.Scope(); got != tc.scope {
			t.Errorf("%+v.Scope() = %q; want %q", tc.f, got, tc.scope)
		}
		if got := tc.f.Holds("host", machines); got != tc.holds {
			t.Errorf("%s: Holds(host, %v) = %v; want %v", tc.scope, machines, got, tc.holds)
		}
	}
	if got := (Freeze{By: "alice", Reason: "release week"}).String(); got != "freeze by alice: release week" {
		t.Errorf("String() = %q", got)
	}
}
