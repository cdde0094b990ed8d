package config

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// A module's container settings (volumes, memory, cpus, user, stop_grace):
// read from the file as strings, checked here with messages in the file's
// words, and turned into mesh.Settings, the declaration's, by Settings.
// The bounds are mesh's, which the host agent holds too.

// memoryUnits are the units a memory size may be written in.
var memoryUnits = map[string]int64{
	"B":   1,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
	"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
}

var (
	memoryRE = regexp.MustCompile(`^([0-9]+) ?([A-Za-z]+)$`)
	cpusRE   = regexp.MustCompile(`^([0-9]+)(?:\.([0-9]{1,9}))?$`)
)

// ParseMemory reads a memory size, a whole number and a unit (256MiB,
// 1GiB, 500MB), into bytes. A number without a unit is refused: 256 bytes
// and 256 MiB are both plausible readings of it.
func ParseMemory(s string) (int64, error) {
	m := memoryRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%q is not a size with a unit, such as 256MiB or 1GiB", s)
	}
	unit, ok := memoryUnits[m[2]]
	if !ok {
		return 0, fmt.Errorf("%q has unit %q; want B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000)", s, m[2])
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * unit, nil
}

// ParseCPUs reads a number of CPUs (0.5, 2, 1.25; at most nine decimals)
// into billionths of a CPU, exactly: no float rounds it.
func ParseCPUs(s string) (int64, error) {
	m := cpusRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%q is not a number of CPUs, such as 0.5 or 2", s)
	}
	whole, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || whole > mesh.MaxNanoCPUs/1e9 {
		return 0, fmt.Errorf("%q is more than %d CPUs", s, int64(mesh.MaxNanoCPUs/1e9))
	}
	frac, _ := strconv.ParseInt((m[2] + "000000000")[:9], 10, 64)
	return whole*1e9 + frac, nil
}

// ParseMount reads a volume as the file writes it: source:target, or
// source:target:ro for read-only.
func ParseMount(s string) (mesh.Mount, error) {
	parts := strings.Split(s, ":")
	switch {
	case len(parts) == 3 && parts[2] == "ro":
		return mesh.Mount{Source: parts[0], Target: parts[1], ReadOnly: true}, nil
	case len(parts) == 3 && parts[2] == "rw":
		return mesh.Mount{Source: parts[0], Target: parts[1]}, nil
	case len(parts) == 2:
		return mesh.Mount{Source: parts[0], Target: parts[1]}, nil
	}
	return mesh.Mount{}, fmt.Errorf("%q is not source:target or source:target:ro, such as data:/var/lib/app or /etc/app:/etc/app:ro", s)
}

// Settings is the module's container settings as a declaration carries
// them. A config that validates always gives them; the error names the
// key of the first that does not read.
func (m Module) Settings() (mesh.Settings, error) {
	var s mesh.Settings
	var errs []error
	for _, v := range m.Volumes {
		mnt, err := ParseMount(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("volumes: %w", err))
			continue
		}
		s.Volumes = append(s.Volumes, mnt)
	}
	if m.Memory != "" {
		n, err := ParseMemory(m.Memory)
		if err != nil {
			errs = append(errs, fmt.Errorf("memory: %w", err))
		}
		s.MemoryBytes = n
	}
	if m.CPUs != "" {
		n, err := ParseCPUs(m.CPUs)
		if err != nil {
			errs = append(errs, fmt.Errorf("cpus: %w", err))
		}
		s.NanoCPUs = n
	}
	s.User = m.User
	s.StopGraceMS = m.StopGrace.Milliseconds()
	return s, errors.Join(errs...)
}

// settingsProblems checks a module's container settings (key is
// modules.<m>), each under its own key, in the file's words.
func settingsProblems(ps *problemList, key string, m Module) {
	targets := map[string]string{}
	for i, v := range m.Volumes {
		mnt, err := ParseMount(v)
		if err == nil {
			err = mnt.Validate()
		}
		if err != nil {
			ps.add(key+".volumes", "item %d: %v", i+1, err)
			continue
		}
		if prev, ok := targets[mnt.Target]; ok {
			ps.add(key+".volumes", "item %d: %q mounts %s, which %q mounts already; one volume per target", i+1, v, mnt.Target, prev)
		}
		targets[mnt.Target] = v
	}
	if m.Memory != "" {
		if n, err := ParseMemory(m.Memory); err != nil {
			ps.add(key+".memory", "%v", err)
		} else if n < mesh.MinMemoryBytes {
			ps.add(key+".memory", "%s is below 6MiB, the least a container engine allows; raise it, or leave memory out for no limit", m.Memory)
		}
	}
	if m.CPUs != "" {
		if n, err := ParseCPUs(m.CPUs); err != nil {
			ps.add(key+".cpus", "%v", err)
		} else if n < mesh.MinNanoCPUs {
			ps.add(key+".cpus", "%s is below 0.001 CPUs; raise it, or leave cpus out for no limit", m.CPUs)
		}
	}
	if m.User != "" {
		if err := (mesh.Settings{User: m.User}).Validate(); err != nil {
			ps.add(key+".user", "%q is not a user name or uid, optionally with :group or :gid, such as \"1000:1000\" or app", m.User)
		}
	}
	switch g := m.StopGrace; {
	case g < 0:
		ps.add(key+".stop_grace", "must be a duration of 0s or more, such as 10s, got %s", g)
	case g > time.Duration(mesh.MaxStopGraceMS)*time.Millisecond:
		ps.add(key+".stop_grace", "%s is longer than an hour, which every push that replaces the container would wait out", g)
	case g%time.Millisecond != 0:
		ps.add(key+".stop_grace", "%s is not a whole number of milliseconds", g)
	}
}
