package testsuite

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
)

// The container settings real services need (issue 26), on the real
// engine: a named volume keeps a module's data across its builds, and
// limits, user and stop grace are what the engine runs the container with.

// statefulProgram is a test module that keeps state in a file: it appends
// to $STATE_FILE which build it is and how many lines earlier builds left
// there, then serves until SIGTERM. Its build name is formatted in, so
// that every commit builds a new digest.
const statefulProgram = `package main

import (
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	const build = %q
	f := os.Getenv("STATE_FILE")
	seen, err := os.ReadFile(f)
	if err != nil && !os.IsNotExist(err) {
		fmt.Println(err)
		os.Exit(1)
	}
	line := fmt.Sprintf("%%s saw %%d\n", build, bytes.Count(seen, []byte("\n")))
	if err := os.WriteFile(f, append(seen, line...), 0o644); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, os.Interrupt)
	<-term
}
`

// dockerSpecMesh is module host alone, built into real images and run by
// the docker runtime on edge-1 alone (one machine: a named volume is the
// engine's, which every machine of the test engine shares), with keys
// added to the module.
func dockerSpecMesh(keys string) stackOptions {
	o := dockerMesh()
	o.modules = []string{"host"}
	o.controlPlane = nil
	o.machines = []machineSpec{{name: "edge-1", tier: 1, modules: []string{"host"}}}
	o.moduleKeys = keys
	return o
}

// testVolume names a volume for this test alone on the shared engine and
// removes it when the test ends, after the stack's containers are gone
// (the cleanup is registered first, so it runs last). It skips the test
// without an engine, as dockerEngine does.
func testVolume(t *testing.T) string {
	t.Helper()
	socket := os.Getenv(envDockerSocket)
	if socket == "" {
		t.Skipf("no Docker engine for the docker tests: export %s=\"$(bash scripts/docker-test.sh)\"", envDockerSocket)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "meshroll-test-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		e := engine{socket: socket}
		if err := e.do(http.MethodDelete, "/volumes/"+name+"?force=1", nil); err != nil {
			t.Logf("remove volume %s: %v", name, err)
		}
	})
	return name
}

// volumeFile is the content of file in the named volume, read where the
// engine keeps it on this machine; "" while there is none.
func volumeFile(t *testing.T, volume, file string) string {
	t.Helper()
	var v struct {
		Mountpoint string `json:"Mountpoint"`
	}
	if err := (engine{socket: os.Getenv(envDockerSocket)}).get("/volumes/"+volume, &v); err != nil {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(v.Mountpoint, file))
	return string(b)
}

// A named volume outlives the builds that mount it: build 1 writes a file,
// build 2 (a new container, the old one removed) reads it and adds to it,
// and an operator's rollback to build 1 (a container again) finds both.
func TestDockerVolumeSurvivesUpgradeAndRollback(t *testing.T) {
	t.Parallel()
	vol := testVolume(t)
	s := newStack(t, dockerSpecMesh(fmt.Sprintf(`env: {STATE_FILE: /data/state}, volumes: ["%s:/data"]`, vol)))
	state := func(want string) {
		t.Helper()
		eventually(t, time.Minute, "the volume holds "+strings.ReplaceAll(want, "\n", " | "), func() bool {
			return volumeFile(t, vol, "state") == want
		})
	}

	g1 := s.commitSource("host", fmt.Sprintf(statefulProgram, "build-1"))
	s.converge("host", g1)
	b1 := s.build("host", g1)
	s.dockerRuns("edge-1", b1)
	state("build-1 saw 0\n")
	r, ok := s.hosts["edge-1"].Report().Running("host")
	require.True(t, ok)
	require.Equal(t, []mesh.Mount{{Source: vol, Target: "/data"}}, r.Volumes, "the host reports the volume it was declared with")

	g2 := s.commitSource("host", fmt.Sprintf(statefulProgram, "build-2"))
	s.converge("host", g2)
	s.dockerRuns("edge-1", s.build("host", g2))
	state("build-1 saw 0\nbuild-2 saw 1\n")

	out, err := s.starter("rollback", "--module", "host", "--reason", "build 2 is bad", "--by", "test", "--wait")
	require.NoError(t, err, out)
	s.dockerRuns("edge-1", b1)
	state("build-1 saw 0\nbuild-2 saw 1\nbuild-1 saw 2\n")
	s.checkJournal("edge-1")
}

// What a module's limits, user and stop grace say is what the engine runs
// its container with, as the engine itself reports it; and the host
// reports them as declared, so that another module's plan keeps them.
func TestDockerLimitsUserAndStopGraceReachTheEngine(t *testing.T) {
	t.Parallel()
	s := newStack(t, dockerSpecMesh(`memory: 64MiB, cpus: 0.5, user: "1000:1000", stop_grace: 3s`))
	st := s.converge("host", s.commit("host"))
	in := s.dockerRuns("edge-1", *st.Build)

	var got struct {
		Config struct {
			User        string `json:"User"`
			StopTimeout *int   `json:"StopTimeout"`
		} `json:"Config"`
		HostConfig struct {
			Memory   int64 `json:"Memory"`
			NanoCpus int64 `json:"NanoCpus"`
		} `json:"HostConfig"`
	}
	require.NoError(t, engine{socket: os.Getenv(envDockerSocket)}.get("/containers/"+in.ID+"/json", &got))
	require.Equal(t, int64(64<<20), got.HostConfig.Memory, "memory limit")
	require.Equal(t, int64(500_000_000), got.HostConfig.NanoCpus, "CPU limit")
	require.Equal(t, "1000:1000", got.Config.User, "user")
	require.NotNil(t, got.Config.StopTimeout, "stop grace")
	require.Equal(t, 3, *got.Config.StopTimeout, "stop grace")

	r, ok := s.hosts["edge-1"].Report().Running("host")
	require.True(t, ok)
	require.Equal(t, mesh.Settings{MemoryBytes: 64 << 20, NanoCPUs: 500_000_000, User: "1000:1000", StopGraceMS: 3000}, r.Settings,
		"the host reports the settings it was declared with")
}
