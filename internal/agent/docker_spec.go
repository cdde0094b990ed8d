package agent

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"github.com/meshroll/meshroll/internal/mesh"
)

// createBody is the Engine API's container create body for c on machine,
// its image pulled as ref, labelled with the spec hash that names it: its
// environment with the runtime's variables over it, its arguments, its
// network (and probe port published on a bridge), and its settings
// (dockerSettings).
func createBody(machine string, c mesh.Container, ref, hash string) map[string]any {
	// The runtime's variables are set here, not in the spec, so that the
	// spec's hash (which names the container) stays the declaration's.
	vars := maps.Clone(c.Env)
	if vars == nil {
		vars = map[string]string{}
	}
	maps.Copy(vars, mesh.RuntimeEnv(machine, c))
	env := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	// A mesh.Container always marshals: plain strings, numbers, maps and
	// slices of them.
	declared, _ := json.Marshal(c)
	hostConfig := map[string]any{"RestartPolicy": map[string]any{"Name": "on-failure"}}
	body := map[string]any{
		"Image": ref,
		"Env":   env,
		"Labels": map[string]string{
			labelMachine: machine, labelModule: c.Module, labelSpec: hash, labelDeclared: string(declared),
		},
		"HostConfig": hostConfig,
	}
	if c.Network == mesh.NetworkHost {
		// On the machine's network the container listens where the
		// probe looks, and nothing is published.
		hostConfig["NetworkMode"] = "host"
	} else if port := probePort(c.Health); port > 0 {
		p := strconv.Itoa(port) + "/tcp"
		body["ExposedPorts"] = map[string]any{p: struct{}{}}
		hostConfig["PortBindings"] = map[string]any{p: []map[string]string{{"HostIp": "127.0.0.1", "HostPort": strconv.Itoa(port)}}}
	}
	if len(c.Args) > 0 {
		body["Cmd"] = c.Args
	}
	dockerSettings(c.Settings, body, hostConfig)
	return body
}

// dockerSettings sets s in a create body and its HostConfig: volumes as
// Mounts (a named volume, which the engine creates on first use and which
// outlives the container; or a bind of the machine's directory, which must
// exist), Memory and NanoCPUs, the User, and the StopTimeout (in whole
// seconds, rounded up) that the engine's stop then waits before SIGKILL.
// Settings left zero are left out: the engine's defaults.
func dockerSettings(s mesh.Settings, body, hostConfig map[string]any) {
	if len(s.Volumes) > 0 {
		mounts := make([]map[string]any, 0, len(s.Volumes))
		for _, v := range s.Volumes {
			typ := "volume"
			if v.Bind() {
				typ = "bind"
			}
			mounts = append(mounts, map[string]any{"Type": typ, "Source": v.Source, "Target": v.Target, "ReadOnly": v.ReadOnly})
		}
		hostConfig["Mounts"] = mounts
	}
	if s.MemoryBytes > 0 {
		hostConfig["Memory"] = s.MemoryBytes
	}
	if s.NanoCPUs > 0 {
		hostConfig["NanoCpus"] = s.NanoCPUs
	}
	if s.User != "" {
		body["User"] = s.User
	}
	if s.StopGraceMS > 0 {
		body["StopTimeout"] = (s.StopGraceMS + 999) / 1000
	}
}
