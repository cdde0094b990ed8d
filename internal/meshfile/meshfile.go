// Package meshfile writes mesh.yaml for fleets made up on the spot: the
// integration tests' stacks and the benchmarks' meshes. One writer, so
// that a key renamed in the config reaches both, and what the bench
// measures is configured the way the tests prove.
//
// Sections a test varies freely (tiers, analysis, windows, push, a
// module's health) are given as YAML text; the rest is typed.
package meshfile

import (
	"cmp"
	"fmt"
	"strings"
)

// File is one mesh.yaml.
type File struct {
	// Address, Namespace and TaskQueue are the temporal: section's
	// (Namespace defaults to "default").
	Address, Namespace, TaskQueue string
	// Compression, when set, is temporal.grpc_compression.
	Compression string
	// StateDir, when set, is state_dir (the worker's state).
	StateDir string
	// Registry, when set, is the address of the registry the go builder
	// pushes to (registry: {address, repository: meshroll}).
	Registry string
	// Push, Tiers, Windows, Notify, Worker and Enroll are those sections'
	// values in YAML flow style, such as {1: {max_parallel: 1, bake: 5s}}
	// for Tiers.
	Push, Tiers, Windows, Notify, Worker, Enroll string
	// Analysis is the analysis: section's value in flow or block style
	// (see Section).
	Analysis string
	Modules  []Module
	Machines []Machine
}

// Module is one entry of modules:.
type Module struct {
	Name string
	// Repo is the module's repository (a path, or "." for the worker's).
	Repo string
	// Path is the module's directory in it; default examples/<Name>.
	Path         string
	ControlPlane bool
	// Health is the health key in flow style; empty leaves it out.
	Health string
	// Network, when set, is the module's network (host or bridge).
	Network string
	// Extra is more keys of the module's flow mapping, such as
	// `builder: command, command: [...]`.
	Extra string
}

// Machine is one entry of machines:.
type Machine struct {
	Name, Host string
	Tier       int
	// NoTier leaves tier out, for a tier's select to place the machine.
	NoTier  bool
	Modules []string
	// Labels, when set, are the machine's labels in flow style, such as
	// {ring: canary}.
	Labels string
	// Token, when set, is the host token the worker sends.
	Token string
}

// String is the file's text.
func (f File) String() string {
	var y strings.Builder
	fmt.Fprintf(&y, "temporal: {address: %q, namespace: %q, task_queue: %q", f.Address, cmp.Or(f.Namespace, "default"), f.TaskQueue)
	put(&y, ", grpc_compression: %q", f.Compression)
	y.WriteString("}\n")
	put(&y, "state_dir: %q\n", f.StateDir)
	put(&y, "registry: {address: %q, repository: meshroll}\n", f.Registry)
	put(&y, "push: %s\n", f.Push)
	y.WriteString("modules:\n")
	for _, m := range f.Modules {
		fmt.Fprintf(&y, "  %s: {repo: %q, path: %s", m.Name, m.Repo, cmp.Or(m.Path, "examples/"+m.Name))
		if m.ControlPlane {
			y.WriteString(", control_plane: true")
		}
		put(&y, ", health: %s", m.Health)
		put(&y, ", network: %s", m.Network)
		put(&y, ", %s", m.Extra)
		y.WriteString("}\n")
	}
	y.WriteString("machines:\n")
	for _, m := range f.Machines {
		fmt.Fprintf(&y, "  %s: {host: %q", m.Name, m.Host)
		if !m.NoTier {
			fmt.Fprintf(&y, ", tier: %d", m.Tier)
		}
		fmt.Fprintf(&y, ", modules: [%s]", strings.Join(m.Modules, ", "))
		put(&y, ", labels: %s", m.Labels)
		put(&y, ", token: %q", m.Token)
		y.WriteString("}\n")
	}
	put(&y, "tiers: %s\n", f.Tiers)
	if f.Analysis != "" {
		fmt.Fprintf(&y, "analysis:\n%s", Section(f.Analysis))
	}
	put(&y, "windows: %s\n", f.Windows)
	put(&y, "notify: %s\n", f.Notify)
	put(&y, "worker: %s\n", f.Worker)
	put(&y, "enroll: %s\n", f.Enroll)
	return y.String()
}

// put writes format with v, when v is set.
func put(y *strings.Builder, format, v string) {
	if v != "" {
		fmt.Fprintf(y, format, v)
	}
}

// Section is a section's value as written under its key: val's lines
// with their common leading whitespace removed, any tab left at the start
// of a line (YAML indents with spaces only) as two spaces, and all of it
// indented two spaces, so that a Go raw string indented with tabs will
// do. Blank lines are dropped.
func Section(val string) string {
	var lines []string
	for _, l := range strings.Split(val, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, strings.TrimRight(l, " \t\r"))
		}
	}
	common := ""
	for i, l := range lines {
		lead := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if i == 0 {
			common = lead
			continue
		}
		for !strings.HasPrefix(lead, common) {
			common = common[:len(common)-1]
		}
	}
	var b strings.Builder
	for _, l := range lines {
		l = strings.TrimPrefix(l, common)
		rest := strings.TrimLeft(l, "\t")
		fmt.Fprintf(&b, "  %s%s\n", strings.Repeat("  ", len(l)-len(rest)), rest)
	}
	return b.String()
}
