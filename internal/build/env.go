package build

import (
	"os"
	"slices"
	"strings"
)

// inheritedEnv is the worker's environment as a build sees it: without any
// MESHROLL_* or TEMPORAL_* variable. Those are how the worker is given its
// secrets (host tokens, the registry password, the Temporal API key, the
// catalogue's DSN), and a build command runs code from the repository: a
// merge must not be able to read them. What a build needs from the worker's
// environment (GOPROXY, GOCACHE, DOCKER_CONFIG, PATH, ...) passes through;
// the builders set their own MESHROLL_* variables after this. Git's
// repository variables are dropped too (withoutGitRepo): a build runs in
// its own checkout.
func inheritedEnv() []string {
	return withoutGitRepo(withoutSecrets(os.Environ()))
}

// GitEnv is the environment to run git in a repository named by -C with:
// this process's, without git's repository variables (GIT_DIR,
// GIT_WORK_TREE, GIT_INDEX_FILE and the others `git rev-parse
// --local-env-vars` lists), which would send git to another repository
// whatever -C says (a worker started from a git hook, or under `git
// bisect run`, has GIT_DIR set), never prompting, in the C locale, with
// extra after.
func GitEnv(extra ...string) []string {
	return append(withoutGitRepo(os.Environ()), append([]string{"GIT_TERMINAL_PROMPT=0", "LC_ALL=C"}, extra...)...)
}

// gitRepoVars are git's repository variables, as `git rev-parse
// --local-env-vars` lists them (git 2.39).
var gitRepoVars = []string{
	"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
	"GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
	"GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX",
	"GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE", "GIT_COMMON_DIR",
}

func withoutGitRepo(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(gitRepoVars, name) || strings.HasPrefix(name, "GIT_CONFIG_KEY_") || strings.HasPrefix(name, "GIT_CONFIG_VALUE_") {
			continue
		}
		out = append(out, kv)
	}
	return out
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
