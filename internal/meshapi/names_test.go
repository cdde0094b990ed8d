package meshapi

import "testing"

func TestParsePlanID(t *testing.T) {
	const c = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		id             string
		module, commit string
		ok             bool
	}{
		{PlanID("host", c), "host", c, true},
		{PlanID("mesh-controller", c), "mesh-controller", c, true},
		{"plan/host/", "", "", false},
		{"plan//" + c, "", "", false},
		{"plan/host", "", "", false},
		{"by-hand", "", "", false},
		{MachineID("edge-1"), "", "", false},
		{"", "", "", false},
	} {
		m, cm, ok := ParsePlanID(tc.id)
		if m != tc.module || cm != tc.commit || ok != tc.ok {
			t.Errorf("ParsePlanID(%q) = %q, %q, %v; want %q, %q, %v", tc.id, m, cm, ok, tc.module, tc.commit, tc.ok)
		}
	}
}
