package testsuite

import (
	"testing"

	"github.com/meshroll/meshroll/internal/registry"
	"github.com/meshroll/meshroll/internal/secret"
)

// A registry that asks who is there (docs/registry.md): the builder pushes
// with the worker's credential and the host agents pull with the hosts'
// pull-only one, on the exec runtime and on the real engine (which the
// docker runtime hands it as X-Registry-Auth); a merge converges on every
// machine. Without the credential a pull is answered 401 and the push
// fails.
func TestARegistryThatAsksForCredentials(t *testing.T) {
	t.Parallel()
	access := registry.Access{
		Push: registry.Credential{Username: "worker", Password: secret.String("push-" + t.Name())},
		Pull: registry.Credential{Username: "hosts", Password: secret.String("pull-" + t.Name())},
	}
	exec := imageMesh()
	exec.exec = true
	for _, tc := range []struct {
		runtime string
		o       stackOptions
	}{
		{"exec", exec},
		{"docker", dockerMesh()},
	} {
		t.Run("on "+tc.runtime, func(t *testing.T) {
			t.Parallel()
			o := tc.o
			o.registryAccess = access
			s := newStack(t, o)
			st := s.converge("host", s.commit("host"))
			s.everywhere(*st.Build)
		})
	}
}
