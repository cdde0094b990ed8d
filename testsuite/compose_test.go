package testsuite

import (
	"bufio"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
)

// No container engine runs here, so docker-compose.yml is validated rather
// than run: loaded with the compose specification's own loader (what
// `docker compose config` uses), then checked for what the topology needs.
// The same topology runs natively in TestProductionTopology.

// composeEnv stands in for the .env an operator writes from
// deploy/compose.env.example.
var composeEnv = map[string]string{"POSTGRES_PASSWORD": "compose-test-pw", "MESHROLL_HOST_TOKEN": "compose-test-token"}

func loadCompose(t *testing.T, env map[string]string) (*types.Project, error) {
	t.Helper()
	var kv []string
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join("..", "docker-compose.yml")},
		cli.WithWorkingDirectory(".."), cli.WithEnv(kv), cli.WithProfiles([]string{"cli"}))
	require.NoError(t, err)
	return opts.LoadProject(context.Background())
}

func TestComposeFileLoads(t *testing.T) {
	p, err := loadCompose(t, composeEnv)
	require.NoError(t, err)
	require.Equal(t, "meshroll", p.Name)
	want := []string{"control-node", "edge-1", "edge-2", "postgres", "registry", "starter", "temporal", "temporal-namespace",
		"temporal-schema", "temporal-ui", "worker-a", "worker-b"}
	require.ElementsMatch(t, want, p.ServiceNames())
}

// The secrets have no defaults: compose refuses to start without them and
// says which one and where to set it.
func TestComposeRequiresSecrets(t *testing.T) {
	for name := range composeEnv {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range composeEnv {
				if k != name {
					env[k] = v
				}
			}
			_, err := loadCompose(t, env)
			require.Error(t, err)
			require.Contains(t, err.Error(), name)
			require.Contains(t, err.Error(), "deploy/compose.env.example")
		})
	}
}

func TestComposeServices(t *testing.T) {
	p, err := loadCompose(t, composeEnv)
	require.NoError(t, err)
	targets := dockerfileTargets(t)
	healthy, completed := types.ServiceConditionHealthy, types.ServiceConditionCompletedSuccessfully
	cases := []struct {
		service string
		target  string            // Dockerfile target, or "" for a pinned upstream image
		image   string            // upstream image, when no target
		health  bool              // has a health check
		deps    map[string]string // depends_on service -> condition
		volumes []string          // named volumes mounted
	}{
		{service: "postgres", image: "postgres:16.6-bookworm", health: true, volumes: []string{"postgres-data"}},
		{service: "temporal-schema", target: "temporal-schema", deps: map[string]string{"postgres": healthy}},
		{service: "temporal", image: "temporalio/server:1.29.1", health: true, deps: map[string]string{"temporal-schema": completed}},
		{service: "temporal-namespace", image: "temporalio/server:1.29.1", deps: map[string]string{"temporal": healthy}},
		{service: "temporal-ui", image: "temporalio/ui:2.42.1", deps: map[string]string{"temporal": healthy}},
		{service: "registry", image: "registry:2.8.3", health: true, volumes: []string{"registry-data"}},
		{service: "edge-1", target: "host", health: true, deps: map[string]string{"registry": healthy}, volumes: []string{"edge-1-state"}},
		{service: "edge-2", target: "host", health: true, deps: map[string]string{"registry": healthy}, volumes: []string{"edge-2-state"}},
		{service: "control-node", target: "host", health: true, deps: map[string]string{"registry": healthy}, volumes: []string{"control-node-state"}},
		{service: "worker-a", target: "worker", health: true, volumes: []string{"worker-a-state"}, deps: map[string]string{
			"temporal-namespace": completed, "postgres": healthy, "registry": healthy, "edge-1": healthy, "edge-2": healthy, "control-node": healthy}},
		{service: "worker-b", target: "worker", health: true, volumes: []string{"worker-b-state"}, deps: map[string]string{
			"temporal-namespace": completed, "postgres": healthy, "registry": healthy, "edge-1": healthy, "edge-2": healthy, "control-node": healthy}},
		{service: "starter", target: "starter", deps: map[string]string{"temporal-namespace": completed}},
	}
	for _, tc := range cases {
		t.Run(tc.service, func(t *testing.T) {
			s, err := p.GetService(tc.service)
			require.NoError(t, err)
			if tc.target != "" {
				require.NotNil(t, s.Build, "%s is built from the Dockerfile", tc.service)
				require.Equal(t, tc.target, s.Build.Target)
				require.Contains(t, targets, s.Build.Target, "the Dockerfile has no stage %q", s.Build.Target)
			} else {
				require.Nil(t, s.Build)
				require.Equal(t, tc.image, s.Image)
			}
			if tc.health {
				require.NotNil(t, s.HealthCheck, "%s has a health check", tc.service)
				require.False(t, s.HealthCheck.Disable)
				require.NotEmpty(t, s.HealthCheck.Test)
			}
			got := map[string]string{}
			for dep, d := range s.DependsOn {
				got[dep] = d.Condition
			}
			if tc.deps == nil {
				tc.deps = map[string]string{}
			}
			require.Equal(t, tc.deps, got, "%s's depends_on", tc.service)
			var named []string
			for _, v := range s.Volumes {
				if v.Type == types.VolumeTypeVolume {
					named = append(named, v.Source)
					require.Contains(t, p.Volumes, v.Source, "%s mounts volume %s, which is not declared", tc.service, v.Source)
				}
			}
			require.ElementsMatch(t, tc.volumes, named, "%s's named volumes", tc.service)
		})
	}
}

// Every image is pinned to a version; none floats on latest.
func TestComposeImagesPinned(t *testing.T) {
	p, err := loadCompose(t, composeEnv)
	require.NoError(t, err)
	pinned := regexp.MustCompile(`^[a-z0-9./-]+:[0-9][A-Za-z0-9._-]*$`)
	for name, s := range p.Services {
		if s.Build != nil {
			require.Regexp(t, `^meshroll/[a-z-]+:local$`, s.Image, "%s: a built image is named meshroll/<target>:local", name)
			continue
		}
		require.Regexp(t, pinned, s.Image, "%s's image is pinned to a version", name)
	}
	// The Dockerfile's base images are pinned too.
	for _, from := range dockerfileFroms(t) {
		if slices.Contains(dockerfileTargets(t), strings.Split(from, ":")[0]) {
			continue // a stage of its own
		}
		require.Regexp(t, `:[0-9$]`, from, "Dockerfile FROM %s is pinned", from)
		require.NotContains(t, from, ":latest")
	}
}

// The mesh config the workers mount parses with meshroll's own loader, and
// what it names exists in the compose file: a host service per machine,
// listening where the machine's URL says, with the token the workers send;
// the Temporal frontend, the registry and the catalogue's database.
func TestComposeMeshConfigMatchesServices(t *testing.T) {
	p, err := loadCompose(t, composeEnv)
	require.NoError(t, err)
	w, err := p.GetService("worker-a")
	require.NoError(t, err)
	var meshFile string
	var srcMounted bool
	for _, v := range w.Volumes {
		if v.Type == types.VolumeTypeBind && v.Target == "/etc/meshroll/mesh.yaml" {
			meshFile = v.Source
			require.True(t, v.ReadOnly)
		}
		if v.Type == types.VolumeTypeBind && v.Target == "/src" {
			srcMounted = true
			// A build checks the commit out as a git worktree, which git
			// records in the checkout's .git.
			require.False(t, v.ReadOnly, "the go builder adds worktrees to /src/.git: it cannot be read-only")
		}
	}
	require.NotEmpty(t, meshFile, "worker-a mounts the mesh config at /etc/meshroll/mesh.yaml")
	require.True(t, srcMounted, "worker-a mounts the checkout at /src")
	require.Equal(t, "1000:1000", w.User, "workers run as the checkout's owner (MESHROLL_UID:MESHROLL_GID, default 1000:1000)")
	require.Equal(t, "/etc/meshroll/mesh.yaml", *w.Environment["MESHROLL_CONFIG"])

	// The file as the workers read it: no MESHROLL_* overrides from this
	// process (CI sets some).
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.EnvPrefix+"_") {
			t.Setenv(k, "") // the loader treats empty as unset
		}
	}
	cfg, err := config.Load(meshFile)
	require.NoError(t, err, "%s parses with internal/config", meshFile)

	hostServices := map[string]types.ServiceConfig{}
	for name, s := range p.Services {
		if s.Build != nil && s.Build.Target == "host" {
			hostServices[name] = s
		}
	}
	require.ElementsMatch(t, cfg.MachineNames(), keys(hostServices), "one host service per machine of the mesh config")
	for _, machine := range cfg.MachineNames() {
		m := cfg.Machines[machine]
		u, err := url.Parse(m.Host)
		require.NoError(t, err)
		require.Equal(t, machine, u.Hostname(), "machine %s's host URL names its compose service", machine)
		s := hostServices[machine]
		args := []string(s.Command)
		require.Equal(t, machine, flagValue(args, "--machine"), "%s's agent answers for %s", machine, machine)
		require.Equal(t, "0.0.0.0:"+u.Port(), flagValue(args, "--listen"), "%s's agent listens on the port of %s", machine, m.Host)
		require.Equal(t, "exec", flagValue(args, "--runtime"))
		require.Equal(t, cfg.Registry.Address, flagValue(args, "--registry"), "%s pulls from the registry the workers push to", machine)
		token := s.Environment["MESHROLL_HOST_TOKEN"]
		require.NotNil(t, token)
		require.Equal(t, composeEnv["MESHROLL_HOST_TOKEN"], *token)
		for _, worker := range []string{"worker-a", "worker-b", "starter"} {
			ws, err := p.GetService(worker)
			require.NoError(t, err)
			sent := ws.Environment["MESHROLL_MACHINES_"+prodEnvName(machine)+"_TOKEN"]
			require.NotNil(t, sent, "%s sends %s's token", worker, machine)
			require.Equal(t, *token, *sent, "%s sends the token %s requires", worker, machine)
		}
	}

	// Temporal, the registry and the catalogue are where the file says.
	addr, port, ok := strings.Cut(cfg.Temporal.Address, ":")
	require.True(t, ok)
	require.Contains(t, p.Services, addr, "temporal.address names a service")
	require.Equal(t, "7233", port)
	ns := p.Services["temporal-namespace"].Environment["TEMPORAL_NAMESPACE"]
	require.NotNil(t, ns)
	require.Equal(t, cfg.Temporal.Namespace, *ns, "the namespace job registers the namespace the workers use")
	ru, err := url.Parse(cfg.Registry.Address)
	require.NoError(t, err)
	require.Contains(t, p.Services, ru.Hostname(), "registry.address names a service")
	require.True(t, cfg.Registry.Insecure, "the compose registry is plain HTTP inside the compose network")
	dsn := w.Environment["MESHROLL_CATALOGUE_DSN"]
	require.NotNil(t, dsn)
	du, err := url.Parse(*dsn)
	require.NoError(t, err)
	require.Equal(t, "postgres", du.Scheme)
	require.Contains(t, p.Services, du.Hostname())
	pg := p.Services[du.Hostname()]
	require.Equal(t, "/"+*pg.Environment["POSTGRES_DB"], du.Path, "the catalogue is the database postgres creates")
	pw, _ := du.User.Password()
	require.Equal(t, composeEnv["POSTGRES_PASSWORD"], pw)

	// Every module is built from the mounted checkout, where its path exists.
	for _, name := range cfg.ModuleNames() {
		mod := cfg.Modules[name]
		require.Equal(t, "/src", mod.Repo, "module %s is built from the checkout mounted at /src", name)
		require.DirExists(t, filepath.Join("..", mod.Path), "module %s's path", name)
	}
}

// The schema job, the server and PostgreSQL agree on the databases and the
// role.
func TestComposeTemporalDatabases(t *testing.T) {
	p, err := loadCompose(t, composeEnv)
	require.NoError(t, err)
	env := func(service, key string) string {
		t.Helper()
		s, err := p.GetService(service)
		require.NoError(t, err)
		v := s.Environment[key]
		require.NotNil(t, v, "%s sets %s", service, key)
		return *v
	}
	for _, pair := range [][4]string{
		{"temporal", "DBNAME", "temporal-schema", "TEMPORAL_DB"},
		{"temporal", "VISIBILITY_DBNAME", "temporal-schema", "TEMPORAL_VISIBILITY_DB"},
		{"temporal", "POSTGRES_USER", "temporal-schema", "SQL_USER"},
		{"temporal", "POSTGRES_USER", "postgres", "POSTGRES_USER"},
		{"temporal", "POSTGRES_PWD", "temporal-schema", "SQL_PASSWORD"},
		{"temporal", "POSTGRES_PWD", "postgres", "POSTGRES_PASSWORD"},
		{"temporal", "POSTGRES_SEEDS", "temporal-schema", "SQL_HOST"},
		{"temporal", "DB_PORT", "temporal-schema", "SQL_PORT"},
	} {
		require.Equal(t, env(pair[0], pair[1]), env(pair[2], pair[3]), "%s's %s is %s's %s", pair[0], pair[1], pair[2], pair[3])
	}
	require.Equal(t, "postgres12", env("temporal", "DB"))
	require.Contains(t, p.Services, env("temporal", "POSTGRES_SEEDS"))
}

// The files the compose file and the Dockerfile mount or copy exist.
func TestComposeFilesExist(t *testing.T) {
	p, err := loadCompose(t, composeEnv)
	require.NoError(t, err)
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind {
				_, err := os.Stat(v.Source)
				require.NoError(t, err, "%s mounts %s", name, v.Source)
			}
		}
	}
	for _, src := range dockerfileCopies(t) {
		require.FileExists(t, filepath.Join("..", src), "the Dockerfile copies %s", src)
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// flagValue is the argument after flag in args, or "".
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

var (
	fromRE = regexp.MustCompile(`(?i)^FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?\s*$`)
	copyRE = regexp.MustCompile(`(?i)^COPY\s+(\S+)\s+\S+\s*$`)
)

// dockerfileLines is the Dockerfile without comments, continuations joined.
func dockerfileLines(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "Dockerfile"))
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || (l == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	require.NoError(t, sc.Err())
	return lines
}

// dockerfileTargets are the Dockerfile's stage names.
func dockerfileTargets(t *testing.T) []string {
	var names []string
	for _, l := range dockerfileLines(t) {
		if m := fromRE.FindStringSubmatch(l); m != nil && m[2] != "" {
			names = append(names, m[2])
		}
	}
	require.NotEmpty(t, names, "the Dockerfile has named stages")
	return names
}

// dockerfileFroms are the images the Dockerfile's stages start from.
func dockerfileFroms(t *testing.T) []string {
	var froms []string
	for _, l := range dockerfileLines(t) {
		if m := fromRE.FindStringSubmatch(l); m != nil {
			froms = append(froms, m[1])
		}
	}
	return froms
}

// dockerfileCopies are the build-context sources of COPY lines (those
// without --from).
func dockerfileCopies(t *testing.T) []string {
	var srcs []string
	for _, l := range dockerfileLines(t) {
		if m := copyRE.FindStringSubmatch(l); m != nil && m[1] != "." {
			srcs = append(srcs, m[1])
		}
	}
	return srcs
}
