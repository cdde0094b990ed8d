package build

import (
	"os"
	"strings"
)

// inheritedEnv is the worker's environment as a build sees it: without any
// MESHROLL_* or TEMPORAL_* variable. Those are how the worker is given its
// secrets (host tokens, the registry password, the Temporal API key, the
// catalogue's DSN), and a build command runs code from the repository: a
// merge must not be able to read them. What a build needs from the worker's
// environment (GOPROXY, GOCACHE, DOCKER_CONFIG, PATH, ...) passes through;
// the builders set their own MESHROLL_* variables after this.
func inheritedEnv() []string {
	return withoutSecrets(os.Environ())
}

func withoutSecrets(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		if strings.HasPrefix(upper, "MESHROLL_") || strings.HasPrefix(upper, "TEMPORAL_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
