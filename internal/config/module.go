package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"time"
)

// Module is one buildable unit: where its source is and how it runs. A merge
// of a module starts one plan, which pushes every machine that runs it.
type Module struct {
	// Repo is the git repository holding the module ("." for the repository
	// meshroll runs from).
	Repo string `mapstructure:"repo"`
	// Path is the module's directory within Repo.
	Path string `mapstructure:"path"`
	// Source is the URL the module's source is published at, which its
	// images carry as org.opencontainers.image.source (default: Repo when
	// that is a URL, else none). It is part of the image, so it comes from
	// the config and never from a clone: two workers whose clones name
	// their origin differently still build one digest for one commit.
	Source string `mapstructure:"source"`
	// ControlPlane marks meshroll's own controller. Machines running it are
	// pushed last (see Validate), each in a batch of its own (see Targets),
	// so that a bad build cannot take down the thing that would roll it
	// back before the rest of the mesh has shown whether the build is good.
	ControlPlane bool `mapstructure:"control_plane"`
	// Main is the package to build, relative to Path (default ".").
	Main string `mapstructure:"main"`
	// Builder is how the module is built: "go" (the default) builds Main
	// into a one-layer image; "command" runs Command, which pushes an image
	// and writes its digest to DigestFile.
	Builder string `mapstructure:"builder"`
	// Branch is the main line whose first-parent order gives generations
	// (default "main").
	Branch string `mapstructure:"branch"`
	// Command is the command builder's argv, run in the module's directory
	// of a clean checkout.
	Command []string `mapstructure:"command"`
	// DigestFile is where Command writes the image digest (default: a file
	// named by $MESHROLL_DIGEST_FILE).
	DigestFile string `mapstructure:"digest_file"`
	// Args are the container's arguments.
	Args []string `mapstructure:"args"`
	// Env is the container's environment. Keys keep the case written in the
	// file (viper would lowercase them).
	Env map[string]string `mapstructure:"env"`
	// Network is the network the module's containers join: host or
	// bridge (mesh.NetworkHost, mesh.NetworkBridge); empty leaves it to
	// each machine's runtime (bridge on docker, the host on exec).
	Network string `mapstructure:"network"`
	// Volumes are mounted into the module's containers, each written
	// source:target, or source:target:ro for read-only: source a named
	// volume (data), which outlives every container that mounts it, or an
	// absolute directory of the machine (/etc/app). Read them, with the
	// other settings below, through Settings.
	Volumes []string `mapstructure:"volumes"`
	// Memory caps each container's memory: a whole number and a unit,
	// 256MiB or 1GiB (KiB, MiB, GiB, TiB; KB, MB, GB, TB are powers of
	// 1000; B is bytes). Empty: no limit.
	Memory string `mapstructure:"memory"`
	// CPUs caps each container's CPU time, in CPUs: 0.5 is half of one,
	// 2 two. Empty: no limit.
	CPUs string `mapstructure:"cpus"`
	// User is who each container's process runs as: a name or uid,
	// optionally :group or :gid ("1000:1000"). Empty: the image's.
	User string `mapstructure:"user"`
	// StopGrace is how long a stopped container has between SIGTERM and
	// SIGKILL. 0: the runtime's default (10s on both).
	StopGrace time.Duration `mapstructure:"stop_grace"`
	// Health is how the module's containers are judged healthy, which is
	// what a push waits for before the next batch. Nil (a module built in
	// code without it) takes DefaultHealth; Load always sets it. Read it
	// through HealthCheck.
	Health *Health `mapstructure:"health"`
}

// RepoDir is the directory of the module's repository on this machine:
// Repo, resolved against configDir (the config file's directory) when it
// is relative. ok is false when Repo is a URL, which names no directory
// here.
func (m Module) RepoDir(configDir string) (dir string, ok bool) {
	if u, err := url.Parse(m.Repo); err == nil && u.Scheme != "" && u.Host != "" {
		return "", false
	}
	if filepath.IsAbs(m.Repo) {
		return m.Repo, true
	}
	return filepath.Join(configDir, m.Repo), true
}

// URLRepoProblem says what to do about a module whose repo is a URL: the
// worker builds from a git clone on its own disk, never from a URL.
func (m Module) URLRepoProblem(name string) string {
	return fmt.Sprintf("%q is a URL, and the worker builds module %s from a git clone on its own disk: "+
		"clone it there and set repo to the clone's directory (source: %q keeps the URL on the images)", m.Repo, name, m.ImageSource())
}

// ImageSource is the org.opencontainers.image.source the module's images
// carry: Source, else Repo when it is a URL (without credentials), else
// none. It depends on the config alone, so every worker builds the same
// image from the same commit.
func (m Module) ImageSource() string {
	if m.Source != "" {
		return m.Source
	}
	u, err := url.Parse(m.Repo)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	u.User = nil
	return u.String()
}
