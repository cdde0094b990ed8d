package host_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

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
