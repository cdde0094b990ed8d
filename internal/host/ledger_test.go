package host_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

func TestSameDeclarationIgnoresOrderAndEmpties(t *testing.T) {
	digestB := "sha256:" + "b" + digestA[8:]
	a := mesh.Declaration{Machine: "m1", Seq: 2, Containers: []mesh.Container{
		{Module: "api", Digest: digestA, Generation: 1, Env: map[string]string{"A": "1", "B": "2"}},
		{Module: "web", Digest: digestB, Generation: 2, Args: []string{}},
	}}
	b := mesh.Declaration{Machine: "m1", Seq: 2, Containers: []mesh.Container{
		{Module: "web", Digest: digestB, Generation: 2},
		{Module: "api", Digest: digestA, Generation: 1, Env: map[string]string{"B": "2", "A": "1"}},
	}}
	assert.True(t, host.SameDeclaration(a, b))
	assert.True(t, host.SameDeclaration(mesh.Declaration{}, mesh.Declaration{Containers: []mesh.Container{}}))

	b.Containers[0].Args = []string{"-v"}
	assert.False(t, host.SameDeclaration(a, b))
	b = host.CloneDeclaration(a)
	b.Force = true
	assert.False(t, host.SameDeclaration(a, b))
}

func TestCloneDeclarationIsDeep(t *testing.T) {
	a := mesh.Declaration{Containers: []mesh.Container{{Module: "api", Args: []string{"x"}, Env: map[string]string{"k": "v"}}}}
	b := host.CloneDeclaration(a)
	b.Containers[0].Args[0] = "y"
	b.Containers[0].Env["k"] = "w"
	b.Containers[0].Module = "web"
	assert.Equal(t, "x", a.Containers[0].Args[0])
	assert.Equal(t, "v", a.Containers[0].Env["k"])
	assert.Equal(t, "api", a.Containers[0].Module)
}

func TestLedgerRunningContainerHoldsFloorWithoutRan(t *testing.T) {
	l := host.Ledger{Machine: "m1"}
	running := []mesh.RunningContainer{{Module: "api", Digest: digestA, Generation: 5, State: mesh.StateRunning}}
	d := mesh.Declaration{Machine: "m1", Seq: 1, Containers: []mesh.Container{{Module: "api", Digest: digestA, Generation: 4}}}
	_, err := l.Admit(running, d)
	var r *host.Refusal
	assert.ErrorAs(t, err, &r)
	assert.Equal(t, host.CodeDowngrade, r.Code)

	running[0].State = mesh.StateCrashLooping
	_, err = l.Admit(running, d)
	assert.NoError(t, err, "a container that does not run holds no floor")
}

func TestLedgerReport(t *testing.T) {
	l := host.Ledger{Machine: "m1"}
	assert.Equal(t, mesh.Report{Machine: "m1", Containers: []mesh.RunningContainer{}}, l.Report(nil),
		"before any declaration: no request, and containers [] rather than null")

	l.Record(mesh.Declaration{Machine: "m1", Seq: 3, Request: "plan/host/x@m1"})
	running := []mesh.RunningContainer{{Module: "api", Digest: digestA, Generation: 4, Seq: 3, State: mesh.StateRunning}}
	assert.Equal(t, mesh.Report{Machine: "m1", LastSeq: 3, LastRequest: "plan/host/x@m1", Containers: running}, l.Report(running))
}

func TestLedgerRunningContainerWithCheckHoldsNoFloorByRunning(t *testing.T) {
	l := host.Ledger{Machine: "m1"}
	running := []mesh.RunningContainer{{
		Module: "api", Digest: digestA, Generation: 5, State: mesh.StateRunning,
		Check: &mesh.Health{HTTP: &mesh.HTTPProbe{}}, Health: mesh.HealthUnhealthy,
	}}
	d := mesh.Declaration{Machine: "m1", Seq: 1, Containers: []mesh.Container{{Module: "api", Digest: digestA, Generation: 4}}}
	_, err := l.Admit(running, d)
	assert.NoError(t, err, "a build that runs but has not counted healthy is reverted without force")

	l.Ran(running[0])
	_, err = l.Admit(running, d)
	var r *host.Refusal
	assert.ErrorAs(t, err, &r, "once it counted, the ledger's floor holds")
}

func TestLedgerRefusesBadChecks(t *testing.T) {
	cases := []struct {
		name  string
		check mesh.Health
		want  string // in the refusal; "" for accepted
	}{
		{"none", mesh.Health{MinHealthyMS: 3000}, ""},
		{"http auto", mesh.Health{HTTP: &mesh.HTTPProbe{Path: "/healthz?deep=1"}, IntervalMS: 1000}, ""},
		{"tcp", mesh.Health{TCP: &mesh.TCPProbe{Port: 8080}}, ""},
		{"exec", mesh.Health{Exec: []string{"/bin/check", "-q"}}, ""},
		{"two probes", mesh.Health{HTTP: &mesh.HTTPProbe{}, TCP: &mesh.TCPProbe{}}, "2 probes declared"},
		{"port too big", mesh.Health{TCP: &mesh.TCPProbe{Port: 65536}}, "tcp port 65536"},
		{"negative port", mesh.Health{HTTP: &mesh.HTTPProbe{Port: -1}}, "http port -1"},
		{"path to another host", mesh.Health{HTTP: &mesh.HTTPProbe{Path: "@evil.example/"}}, "not an absolute path"},
		{"path with a newline", mesh.Health{HTTP: &mesh.HTTPProbe{Path: "/a\nb"}}, "not an absolute path"},
		{"empty command", mesh.Health{Exec: []string{}}, "exec names no command"},
		{"blank command", mesh.Health{Exec: []string{""}}, "exec names no command"},
		{"negative interval", mesh.Health{IntervalMS: -1}, "interval_ms -1 is negative"},
		{"negative min_healthy", mesh.Health{MinHealthyMS: -5}, "min_healthy_ms -5 is negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			check := tc.check
			if r := admitInvalid(t, mesh.Container{Module: "api", Digest: digestA, Health: &check}, tc.want); r != nil {
				assert.Contains(t, r.Message, "module api: health: ")
			}
		})
	}
}

// admitInvalid admits a first declaration of c alone: accepted when want
// is empty, else refused as invalid with want in the message, which it
// returns.
func admitInvalid(t *testing.T, c mesh.Container, want string) *host.Refusal {
	t.Helper()
	l := host.Ledger{Machine: "m1"}
	_, err := l.Admit(nil, mesh.Declaration{Machine: "m1", Seq: 1, Containers: []mesh.Container{c}})
	if want == "" {
		assert.NoError(t, err)
		return nil
	}
	var r *host.Refusal
	require.ErrorAs(t, err, &r)
	assert.Equal(t, host.CodeInvalid, r.Code)
	assert.Contains(t, r.Message, want)
	return r
}

// A container's network is host, bridge or left to the runtime; anything
// else is refused as invalid, naming it.
func TestAdmitChecksTheNetwork(t *testing.T) {
	for _, tc := range []struct{ network, want string }{
		{"", ""}, {mesh.NetworkHost, ""}, {mesh.NetworkBridge, ""},
		{"overlay", `module api: network "overlay": want "host" or "bridge"`},
	} {
		t.Run(tc.network, func(t *testing.T) {
			admitInvalid(t, mesh.Container{Module: "api", Digest: digestA, Network: tc.network}, tc.want)
		})
	}
}

// A container's settings are refused as invalid, naming the module and the
// field, when no runtime could honour them: nothing of the declaration is
// applied.
func TestAdmitChecksTheSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    mesh.Settings
		want string
	}{
		{"all of them", mesh.Settings{
			Volumes:     []mesh.Mount{{Source: "data", Target: "/var/lib/api"}, {Source: "/etc/api", Target: "/etc/api", ReadOnly: true}},
			MemoryBytes: 256 << 20, NanoCPUs: 500_000_000, User: "1000:1000", StopGraceMS: 10_000,
		}, ""},
		{"empty source", mesh.Settings{Volumes: []mesh.Mount{{Target: "/data"}}}, "module api: volumes[0]: source is empty"},
		{"relative target", mesh.Settings{Volumes: []mesh.Mount{{Source: "data", Target: "var/lib"}}}, `module api: volumes[0]: target "var/lib" is not an absolute path`},
		{"target twice", mesh.Settings{Volumes: []mesh.Mount{{Source: "aa", Target: "/d"}, {Source: "/b", Target: "/d"}}}, "module api: volumes[1]: target /d is mounted by volumes[0] already"},
		{"memory below the engine's least", mesh.Settings{MemoryBytes: 4096}, "module api: memory_bytes 4096"},
		{"negative cpus", mesh.Settings{NanoCPUs: -1}, "module api: nano_cpus -1"},
		{"user with a space", mesh.Settings{User: "root admin"}, `module api: user "root admin"`},
		{"negative grace", mesh.Settings{StopGraceMS: -1}, "module api: stop_grace_ms -1"},
		{"two at once", mesh.Settings{MemoryBytes: -1, StopGraceMS: -1}, "memory_bytes -1: want 0 (no limit) or at least 6291456 (6 MiB); stop_grace_ms -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admitInvalid(t, mesh.Container{Module: "api", Digest: digestA, Settings: tc.s}, tc.want)
		})
	}
}

func TestCloneContainerIsDeep(t *testing.T) {
	a := mesh.Container{Module: "api", Health: &mesh.Health{HTTP: &mesh.HTTPProbe{Port: 1}, TCP: &mesh.TCPProbe{Port: 2}, Exec: []string{"x"}}}
	b := host.CloneContainer(a)
	b.Health.HTTP.Port, b.Health.TCP.Port, b.Health.Exec[0], b.Health.MinHealthyMS = 9, 9, "y", 9
	assert.Equal(t, &mesh.Health{HTTP: &mesh.HTTPProbe{Port: 1}, TCP: &mesh.TCPProbe{Port: 2}, Exec: []string{"x"}}, a.Health)
	v := mesh.Container{Module: "api", Settings: mesh.Settings{Volumes: []mesh.Mount{{Source: "data", Target: "/d"}}}}
	host.CloneContainer(v).Volumes[0].Source = "other"
	assert.Equal(t, "data", v.Volumes[0].Source, "volumes are copied")
	assert.Nil(t, host.CloneHealth(nil))
}

// Each container is reported with the declaration that put its digest
// there: a later declaration of another module keeps the introduction, a
// new digest (a push, a revert) replaces it, a module left out is gone.
func TestLedgerReportsWhoIntroducedEachDigest(t *testing.T) {
	digestB := "sha256:" + "b" + digestA[8:]
	digestC := "sha256:" + "c" + digestA[8:]
	l := host.Ledger{Machine: "m1"}
	seq := uint64(0)
	declare := func(plan string, revert bool, cs ...mesh.Container) {
		seq++
		l.Record(mesh.Declaration{Machine: "m1", Seq: seq, Plan: plan, Revert: revert, Containers: cs})
	}
	introduced := func(module, digest string) *mesh.Introduction {
		rep := l.Report([]mesh.RunningContainer{{Module: module, Digest: digest}})
		return rep.Containers[0].Introduced
	}
	api := func(d string) mesh.Container { return mesh.Container{Module: "api", Digest: d} }
	web := func(d string) mesh.Container { return mesh.Container{Module: "web", Digest: d} }

	declare("plan/api/1", false, api(digestA))
	declare("plan/web/1", false, api(digestA), web(digestB))
	assert.Equal(t, &mesh.Introduction{Plan: "plan/api/1", Seq: 1}, introduced("api", digestA), "kept by web's plan")
	assert.Equal(t, &mesh.Introduction{Plan: "plan/web/1", Seq: 2}, introduced("web", digestB))
	assert.Nil(t, introduced("api", digestC), "a digest the ledger was not told is not attributed")

	declare("plan/api/2", false, api(digestC), web(digestB))
	declare("plan/api/2", true, api(digestA), web(digestB))
	assert.Equal(t, &mesh.Introduction{Plan: "plan/api/2", Seq: 4, Revert: true}, introduced("api", digestA), "put back by a revert")
	assert.Equal(t, &mesh.Introduction{Plan: "plan/web/1", Seq: 2}, introduced("web", digestB))

	declare("plan/web/2", false, web(digestB))
	declare("plan/api/3", false, api(digestA), web(digestB))
	assert.Equal(t, &mesh.Introduction{Plan: "plan/api/3", Seq: 6}, introduced("api", digestA), "left out, then back: introduced anew")
}
