package testsuite

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/meshroll/meshroll/internal/devserver"
)

// shared is the package's one dev server, started by the first test that
// asks (sharedServer) and stopped by TestMain once every test is done.
var shared struct {
	once sync.Once
	srv  *devserver.Server
	err  error
}

// sharedServer is the package's shared dev server: each stack on it takes
// a namespace of its own (devserver.Server.NewNamespace), so the package
// pays for one server start, not one per test. It skips or fails t as
// devserver.Start does when the CLI is missing.
func sharedServer(t *testing.T) *devserver.Server {
	t.Helper()
	devserver.Require(t)
	shared.once.Do(func() { shared.srv, shared.err = devserver.Launch(devserver.Options{}) })
	if shared.err != nil {
		t.Fatalf("the package's shared dev server: %v", shared.err)
	}
	return shared.srv
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	if shared.srv != nil {
		if err := shared.srv.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the shared dev server: %v\n", err)
		}
	}
	os.Exit(code)
}
