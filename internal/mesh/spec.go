package mesh

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Settings are what a real service needs of its container beyond its image,
// arguments, environment, health and network: where its data lives, what it
// may use, who it runs as and how long it has to stop. They are embedded in
// Container (what is declared) and RunningContainer (what the host reports
// it was declared with), so that a plan of another module keeps them as the
// machine runs them. Every field is omitted when zero, so declarations,
// journals and histories written before they existed read, and hash,
// unchanged. The zero value is the runtime's own default for each.
type Settings struct {
	// Volumes are mounted into the container: a named volume, which
	// outlives every container that mounts it, or a directory of the
	// machine (an absolute Source).
	Volumes []Mount `json:"volumes,omitempty"`
	// MemoryBytes caps the container's memory; 0 is no limit.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// NanoCPUs caps the CPU time it may use, in billionths of a CPU
	// (500000000 is half a CPU, as the Docker Engine counts it); 0 is no
	// limit.
	NanoCPUs int64 `json:"nano_cpus,omitempty"`
	// User is who the process runs as: a name or uid, optionally with
	// :group or :gid; empty is the image's own.
	User string `json:"user,omitempty"`
	// StopGraceMS is how long the process has between SIGTERM and SIGKILL
	// when it is stopped; 0 is the runtime's default.
	StopGraceMS int64 `json:"stop_grace_ms,omitempty"`
}

// Mount is one volume of a container.
type Mount struct {
	// Source is a named volume (a name such as "data") or a directory of
	// the machine (an absolute path such as "/etc/app").
	Source string `json:"source"`
	// Target is where the container sees it: an absolute path.
	Target string `json:"target"`
	// ReadOnly mounts it read-only.
	ReadOnly bool `json:"read_only,omitempty"`
}

// Bind reports whether the mount is a directory of the machine rather
// than a named volume.
func (m Mount) Bind() bool { return strings.HasPrefix(m.Source, "/") }

// String is the mount as mesh.yaml writes it: source:target, with :ro
// when read-only.
func (m Mount) String() string {
	s := m.Source + ":" + m.Target
	if m.ReadOnly {
		s += ":ro"
	}
	return s
}

// Bounds of Settings, shared by the config and the host so that a value
// one accepts the other does too.
const (
	// MinMemoryBytes is the smallest memory limit: the Docker Engine
	// refuses less (6 MiB), and no process meshroll runs fits in it.
	MinMemoryBytes = 6 << 20
	// MinNanoCPUs is the smallest CPU limit, a thousandth of a CPU.
	MinNanoCPUs = 1_000_000
	// MaxNanoCPUs is the largest CPU limit, 1024 CPUs: more is a typo.
	MaxNanoCPUs = 1024 * 1_000_000_000
	// MaxStopGraceMS is the longest stop grace, an hour: a push waits it
	// out for every container it replaces.
	MaxStopGraceMS = 60 * 60 * 1000
)

var (
	// volumeNameRE is a Docker Engine volume name.
	volumeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]+$`)
	// userRE is a user (name or uid) and an optional group (name or gid).
	userRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$`)
)

// Validate checks the settings as any runtime would take them, naming the
// field of each problem (volumes[1].target, memory_bytes...): mounts with a
// source and an absolute target, no target twice, limits within bounds, a
// user that is a name or id. All problems are returned, joined.
func (s Settings) Validate() error {
	var errs []error
	targets := map[string]int{}
	for i, m := range s.Volumes {
		field := fmt.Sprintf("volumes[%d]", i)
		if err := m.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
			continue
		}
		if j, ok := targets[path.Clean(m.Target)]; ok {
			errs = append(errs, fmt.Errorf("%s: target %s is mounted by volumes[%d] already", field, m.Target, j))
		}
		targets[path.Clean(m.Target)] = i
	}
	if b := s.MemoryBytes; b != 0 && b < MinMemoryBytes {
		errs = append(errs, fmt.Errorf("memory_bytes %d: want 0 (no limit) or at least %d (6 MiB)", b, MinMemoryBytes))
	}
	if n := s.NanoCPUs; n != 0 && (n < MinNanoCPUs || n > MaxNanoCPUs) {
		errs = append(errs, fmt.Errorf("nano_cpus %d: want 0 (no limit) or %d (0.001 CPU) to %d (1024 CPUs)", n, int64(MinNanoCPUs), int64(MaxNanoCPUs)))
	}
	if u := s.User; u != "" && !userRE.MatchString(u) {
		errs = append(errs, fmt.Errorf("user %q: want a user name or uid, optionally with :group or :gid, such as 1000:1000", u))
	}
	if g := s.StopGraceMS; g < 0 || g > MaxStopGraceMS {
		errs = append(errs, fmt.Errorf("stop_grace_ms %d: want 0 (the runtime's default) to %d (an hour)", g, int64(MaxStopGraceMS)))
	}
	return errors.Join(errs...)
}

// Validate checks one mount: a source, a clean absolute target below /.
func (m Mount) Validate() error {
	switch {
	case m.Source == "":
		return errors.New("source is empty: name a volume, such as data, or a directory of the machine, such as /srv/app")
	case m.Bind() && path.Clean(m.Source) != m.Source:
		return fmt.Errorf("source %q is not a clean absolute path (no .., no trailing /); write %q", m.Source, path.Clean(m.Source))
	case !m.Bind() && !volumeNameRE.MatchString(m.Source):
		return fmt.Errorf("source %q is neither an absolute path nor a volume name (2 or more of [A-Za-z0-9_.-], starting with a letter or digit)", m.Source)
	case !strings.HasPrefix(m.Target, "/"):
		return fmt.Errorf("target %q is not an absolute path such as /var/lib/app", m.Target)
	case path.Clean(m.Target) != m.Target || m.Target == "/":
		return fmt.Errorf("target %q is not a clean absolute path below / (no .., no trailing /)", m.Target)
	case strings.ContainsAny(m.Source+m.Target, ":,\n"):
		return fmt.Errorf("source %q or target %q holds a ':', ',' or newline, which no engine mounts", m.Source, m.Target)
	}
	return nil
}

// Clone is a deep copy of s.
func (s Settings) Clone() Settings {
	s.Volumes = slices.Clone(s.Volumes)
	return s
}

// SpecHash names a container's whole declaration (hex SHA-256 of its JSON,
// with its volumes in target order): runtimes keep a container whose hash is
// unchanged and recreate one whose hash changed, and the docker runtime
// names containers by it. Map keys are marshalled sorted, so the order an
// env was written in changes nothing; the order of volumes does not either.
// A container declared before Settings existed hashes as it always did, so
// an agent upgraded to this code adopts what runs and recreates nothing.
func (c Container) SpecHash() string {
	if len(c.Volumes) > 1 {
		c.Volumes = slices.SortedFunc(slices.Values(c.Volumes), func(a, b Mount) int {
			return cmp.Or(strings.Compare(a.Target, b.Target), strings.Compare(a.Source, b.Source))
		})
	}
	b, err := json.Marshal(c)
	if err != nil {
		// A Container holds strings, numbers, lists and maps of strings:
		// it always marshals.
		panic(fmt.Sprintf("mesh: marshal container %s: %v", c.Module, err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// SameSpec reports whether a and b are declared identically (SpecHash): the
// one rule by which every runtime, and the agent's report, keeps a container
// running across a declaration rather than replacing it.
func SameSpec(a, b Container) bool { return a.SpecHash() == b.SpecHash() }
