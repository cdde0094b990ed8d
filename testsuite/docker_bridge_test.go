package testsuite

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Bridge networking on a real Docker Engine (issue 26): the bridge engine
// (`scripts/docker-test.sh --bridge`) has a bridge of its own that routes
// nothing off the machine, so a module declared `network: bridge` runs
// with an address of its own there, and the agent's probe reaches it only
// through the port the runtime publishes on 127.0.0.1.

// bridgeHealthServer is healthServer listening on every address of its
// container: the published port reaches the container's address on the
// bridge, never its loopback.
var bridgeHealthServer = strings.Replace(healthServer, `"127.0.0.1:"+os.Getenv`, `":"+os.Getenv`, 1)

// bridgeInspect is what the engine says of a bridge container's network.
type bridgeInspect struct {
	Config struct {
		Image string   `json:"Image"`
		Env   []string `json:"Env"`
	} `json:"Config"`
	HostConfig struct {
		NetworkMode  string `json:"NetworkMode"`
		PortBindings map[string][]struct {
			HostIP   string `json:"HostIp"`
			HostPort string `json:"HostPort"`
		} `json:"PortBindings"`
	} `json:"HostConfig"`
	NetworkSettings struct {
		IPAddress string `json:"IPAddress"`
	} `json:"NetworkSettings"`
}

// port is the probe port the agent picked for the container, from the
// environment it runs with.
func (b bridgeInspect) port() string {
	for _, kv := range b.Config.Env {
		if v, ok := strings.CutPrefix(kv, mesh.EnvPort+"="); ok {
			return v
		}
	}
	return ""
}

// A module on the bridge, with real host agents (--runtime docker) on the
// bridge engine, an http probe on a port the agent picks, the embedded
// registry and a real dev server: the plan converges, each container on
// the bridge with an address of its own and its probe port published on
// 127.0.0.1 (the engine says so, and the health endpoint answers there from
// the machine). Then a build whose probe answers 500 halts the plan at its
// first batch and is put back, as on the host network
// (TestBadBuildStopsAtItsFirstBatch): the tier's second machine is never
// pushed, the control node untouched.
func TestDockerBridgeProbeReachesThePublishedPort(t *testing.T) {
	t.Parallel()
	require.NotEqual(t, healthServer, bridgeHealthServer, "the bridge build listens on every address")
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	e1, e2, cn := "edge-1-"+suffix, "edge-2-"+suffix, "control-"+suffix
	machines := []machineSpec{
		{name: e1, tier: 1, modules: []string{"host"}},
		{name: e2, tier: 1, modules: []string{"host"}},
		{name: cn, tier: 2, modules: []string{"host"}},
	}
	s, e, procs := dockerHostStack(t, stackOptions{faults: true, noAgents: true, images: true, docker: true, bridge: true,
		modules: []string{"host"}, machines: machines, tiers: "{1: {max_parallel: 1}}",
		health: "{http: {port: auto, path: /healthz}, interval: 200ms, min_healthy: 1s, deadline: 15s}"})

	good := s.wait(s.start("host", s.commitSource("host", fmt.Sprintf(bridgeHealthServer, "host good", 200, 200))).ID)
	require.Equal(t, meshapi.PlanConverged, good.State, good.Reason)
	for _, m := range machines {
		r, ok := procs[m.name].report().Running("host")
		require.True(t, ok, "%s runs host", m.name)
		require.Equal(t, mesh.HealthHealthy, r.Health, "%s's probe passed", m.name)
		require.Equal(t, mesh.NetworkBridge, r.Network, "%s reports the network as declared", m.name)

		var in bridgeInspect
		require.NoError(t, e.get("/containers/"+e.inspectOne(t, m.name).ID+"/json", &in))
		require.Equal(t, good.Build.Image+"@"+good.Build.Digest, in.Config.Image, "%s runs the build by digest", m.name)
		require.NotEqual(t, "host", in.HostConfig.NetworkMode, "%s's container is not on the host network", m.name)
		require.NotEmpty(t, in.NetworkSettings.IPAddress, "%s's container has an address of its own on the bridge", m.name)
		port := in.port()
		require.NotEmpty(t, port, "%s's container is told its probe port", m.name)
		bindings := in.HostConfig.PortBindings[port+"/tcp"]
		require.Len(t, bindings, 1, "%s publishes its probe port", m.name)
		require.Equal(t, "127.0.0.1", bindings[0].HostIP, "%s publishes on loopback only", m.name)
		require.Equal(t, port, bindings[0].HostPort, "%s publishes the probe port under its own number", m.name)
		require.Equal(t, "status 200\n", httpBody(t, net.JoinHostPort("127.0.0.1", port)), "%s's health endpoint, from the machine", m.name)
	}

	id := s.start("host", s.commitSource("host", fmt.Sprintf(bridgeHealthServer, "host bad", 500, 500))).ID
	st := s.wait(id)
	t.Logf("the plan's words: %s: %s", st.State, st.Reason)
	require.Equal(t, meshapi.PlanHalted, st.State, st.Reason)
	require.Contains(t, st.Reason, "tier 1 halted: 1 of its 2 machines failed")
	require.Contains(t, st.Reason, "its 1 machine not yet pushed and later tiers untouched")
	require.Contains(t, st.Reason, "http probe (GET :$MESHROLL_PORT/healthz)")
	require.Contains(t, st.Reason, "put back on what it ran")
	first, _ := st.Machine(e1)
	require.Equal(t, meshapi.MachineFailed, first.State)
	second, _ := st.Machine(e2)
	require.Equal(t, meshapi.MachineSkipped, second.State, "the second machine of the tier is never pushed")
	require.Equal(t, meshapi.TierSkipped, st.Tiers[1].State, "tier 2 untouched")
	for _, m := range machines {
		checkJournalEntries(t, m.name, journalOver(t, procs[m.name].client()))
		runsBuild(t, m.name, procs[m.name].report(), *good.Build)
		var in bridgeInspect
		require.NoError(t, e.get("/containers/"+e.inspectOne(t, m.name).ID+"/json", &in))
		require.Equal(t, good.Build.Image+"@"+good.Build.Digest, in.Config.Image, "%s's engine runs the good build", m.name)
	}
}

// httpBody is the body of GET /healthz at addr, failing the test on any
// error.
func httpBody(t *testing.T, addr string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
