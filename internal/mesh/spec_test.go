package mesh

import (
	"encoding/json"
	"strings"
	"testing"
)

func specContainer() Container {
	return Container{
		Module: "web", Digest: "sha256:" + strings.Repeat("a", 64), Generation: 3,
		Image: "127.0.0.1:5000/meshroll/web", Args: []string{"serve"},
		Env: map[string]string{"A": "1", "B": "2", "C": "3"},
		Settings: Settings{
			Volumes:     []Mount{{Source: "data", Target: "/var/lib/web"}, {Source: "/etc/web", Target: "/etc/web", ReadOnly: true}},
			MemoryBytes: 256 << 20, NanoCPUs: 500_000_000, User: "1000:1000", StopGraceMS: 10_000,
		},
	}
}

// Every setting is part of the spec: a change of any one of them changes
// the hash (which recreates the container); the order env was written in,
// or volumes listed in, does not.
func TestSpecHash(t *testing.T) {
	base := specContainer()
	for _, tc := range []struct {
		name   string
		change func(*Container)
		same   bool
	}{
		{"nothing", func(*Container) {}, true},
		{"env written in another order", func(c *Container) {
			var env map[string]string
			if err := json.Unmarshal([]byte(`{"C":"3","A":"1","B":"2"}`), &env); err != nil {
				t.Fatal(err)
			}
			c.Env = env
		}, true},
		{"volumes listed in another order", func(c *Container) {
			c.Volumes = []Mount{c.Volumes[1], c.Volumes[0]}
		}, true},
		{"env value", func(c *Container) { c.Env = map[string]string{"A": "1", "B": "2", "C": "4"} }, false},
		{"volume source", func(c *Container) { c.Volumes = []Mount{{Source: "other", Target: "/var/lib/web"}, c.Volumes[1]} }, false},
		{"volume read-only", func(c *Container) { c.Volumes = []Mount{c.Volumes[0], {Source: "/etc/web", Target: "/etc/web"}} }, false},
		{"a volume less", func(c *Container) { c.Volumes = c.Volumes[:1] }, false},
		{"memory", func(c *Container) { c.MemoryBytes = 512 << 20 }, false},
		{"cpus", func(c *Container) { c.NanoCPUs = 1_000_000_000 }, false},
		{"user", func(c *Container) { c.User = "app" }, false},
		{"stop grace", func(c *Container) { c.StopGraceMS = 30_000 }, false},
		{"network", func(c *Container) { c.Network = NetworkHost }, false},
		{"digest", func(c *Container) { c.Digest = "sha256:" + strings.Repeat("b", 64) }, false},
	} {
		c := specContainer()
		c.Volumes = append([]Mount(nil), c.Volumes...)
		tc.change(&c)
		if got := SameSpec(base, c); got != tc.same {
			t.Errorf("%s: SameSpec = %v, want %v", tc.name, got, tc.same)
		}
		if got := base.SpecHash() == c.SpecHash(); got != tc.same {
			t.Errorf("%s: equal hashes = %v, want %v", tc.name, got, tc.same)
		}
	}
}

// A container declared before Settings existed hashes as it always did
// (SHA-256 of its JSON), so that an agent upgraded to this code finds the
// containers it named then and recreates none of them.
func TestSpecHashOfAnOldDeclarationIsUnchanged(t *testing.T) {
	c := Container{Module: "host", Digest: "sha256:" + strings.Repeat("c", 64), Generation: 7, Image: "r/host",
		Env: map[string]string{"B": "2", "A": "1"}, Network: NetworkHost}
	// The hash the docker runtime gave this container before Settings
	// existed (its specHash: SHA-256 of the container's JSON).
	const before = "5721580c831639264dc097e79d7b8a32b950517270b743415ee3ad0ce45a07da"
	if got := c.SpecHash(); got != before {
		t.Errorf("SpecHash() = %s, want %s as before Settings existed", got, before)
	}
}

func TestSettingsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Settings
		want string // "" is valid
	}{
		{"none", Settings{}, ""},
		{"all of them", specContainer().Settings, ""},
		{"empty source", Settings{Volumes: []Mount{{Target: "/data"}}}, "volumes[0]: source is empty"},
		{"relative target", Settings{Volumes: []Mount{{Source: "data", Target: "data"}}}, `volumes[0]: target "data" is not an absolute path`},
		{"root target", Settings{Volumes: []Mount{{Source: "data", Target: "/"}}}, `target "/" is not a clean absolute path`},
		{"unclean target", Settings{Volumes: []Mount{{Source: "data", Target: "/a/../b"}}}, "not a clean absolute path"},
		{"unclean source", Settings{Volumes: []Mount{{Source: "/etc/app/", Target: "/b"}}}, `source "/etc/app/" is not a clean absolute path`},
		{"bad volume name", Settings{Volumes: []Mount{{Source: "my volume", Target: "/b"}}}, "neither an absolute path nor a volume name"},
		{"target twice", Settings{Volumes: []Mount{{Source: "a1", Target: "/d"}, {Source: "b1", Target: "/d"}}}, "volumes[1]: target /d is mounted by volumes[0] already"},
		{"colon", Settings{Volumes: []Mount{{Source: "/a:b", Target: "/d"}}}, "holds a ':'"},
		{"memory too small", Settings{MemoryBytes: 1024}, "memory_bytes 1024"},
		{"memory negative", Settings{MemoryBytes: -1}, "memory_bytes -1"},
		{"cpus too small", Settings{NanoCPUs: 10}, "nano_cpus 10"},
		{"cpus too many", Settings{NanoCPUs: MaxNanoCPUs + 1}, "nano_cpus"},
		{"user with a space", Settings{User: "a b"}, `user "a b"`},
		{"user with two colons", Settings{User: "1:2:3"}, `user "1:2:3"`},
		{"grace negative", Settings{StopGraceMS: -1}, "stop_grace_ms -1"},
		{"grace too long", Settings{StopGraceMS: MaxStopGraceMS + 1}, "stop_grace_ms"},
	} {
		err := tc.s.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Validate() = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
