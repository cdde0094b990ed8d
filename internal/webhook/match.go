package webhook

import (
	"context"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/config"
)

// Route says which repository and branch a module deploys from: a push
// event that names one of Names, to Branch, is the module's merge.
type Route struct {
	Module string
	Branch string
	// Names are the repository's names, normalised (see normalise): the
	// module's source, its repo (a URL, or the clone's directory), and
	// the clone's origin URL.
	Names []string
}

// Routes are the mesh's modules as the receiver matches events to them.
// A module is named by its source, by its repo, and, when its repo is a
// clone on this machine, by the clone's absolute directory and its origin
// remote's URL, read now (a new origin needs a restart): so a mesh with
// repo: . (the clone meshroll runs from) is matched by the repository it
// was cloned from, or by source: when the git host knows it by another
// URL, and a bare repository that is itself the module's repo is matched
// by its path.
func Routes(ctx context.Context, cfg *config.Config, configDir string) []Route {
	var rs []Route
	for _, name := range cfg.ModuleNames() {
		m := cfg.Modules[name]
		names := []string{m.Source}
		if dir, local := m.RepoDir(configDir); !local {
			names = append(names, m.Repo)
		} else {
			if abs, err := filepath.Abs(dir); err == nil {
				dir = abs
			}
			names = append(names, dir, build.OriginURL(ctx, dir))
		}
		r := Route{Module: name, Branch: m.Branch}
		if r.Branch == "" {
			r.Branch = build.DefaultBranch
		}
		for _, n := range names {
			if k := normalise(n); k != "" && !slices.Contains(r.Names, k) {
				r.Names = append(r.Names, k)
			}
		}
		rs = append(rs, r)
	}
	return rs
}

// scpLike is git's user@host:path form of an SSH URL.
var scpLike = regexp.MustCompile(`^(?:[^@/]+@)?([^:/]+):([^/].*)$`)

// normalise is a repository's name as the receiver compares them: no
// scheme, user or port, the host in lower case, no trailing slash or .git
// (https://GitHub.com/org/app.git/, git@github.com:org/app and
// ssh://git@github.com:22/org/app are all github.com/org/app); a local
// path is cleaned, and file:// taken off it. "" stays "".
func normalise(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	var host, path string
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Scheme != "file" && u.Host != "" {
		host, path = u.Hostname(), u.Path
	} else if err == nil && u.Scheme == "file" {
		path = filepath.Clean(u.Path)
	} else if m := scpLike.FindStringSubmatch(s); m != nil && !filepath.IsAbs(s) && !strings.HasPrefix(s, ".") {
		host, path = m[1], "/"+m[2]
	} else {
		path = filepath.Clean(s)
	}
	path = strings.TrimSuffix(strings.TrimRight(path, "/"), ".git")
	path = strings.TrimRight(path, "/")
	if host == "" {
		return path
	}
	return strings.ToLower(host) + path
}

// match is what the routes say of a push: the modules deploying its
// branch of its repository, and the branches the repository's modules
// deploy (to say why nothing matched).
func match(routes []Route, p push, branch string) (modules, branches []string) {
	var names []string
	for _, n := range p.Names {
		if k := normalise(n); k != "" {
			names = append(names, k)
		}
	}
	for _, r := range routes {
		if !r.names(names) {
			continue
		}
		if r.Branch == branch {
			modules = append(modules, r.Module)
		} else if !slices.Contains(branches, r.Branch) {
			branches = append(branches, r.Branch)
		}
	}
	sort.Strings(branches)
	return modules, branches
}

// names reports whether any of the event's normalised names is one of the
// route's: the same URL or path, or an owner/name (GitHub's full_name,
// GitLab's path_with_namespace) that ends one of the route's URLs.
func (r Route) names(event []string) bool {
	for _, e := range event {
		for _, n := range r.Names {
			if e == n {
				return true
			}
			if ownerName(e) && !strings.HasPrefix(n, "/") && strings.HasSuffix(strings.ToLower(n), "/"+strings.ToLower(e)) {
				return true
			}
		}
	}
	return false
}

// ownerName reports whether s is an owner/name (group/sub/name on GitLab)
// rather than a URL or a path.
func ownerName(s string) bool {
	return s != "" && !strings.HasPrefix(s, "/") && !strings.Contains(strings.SplitN(s, "/", 2)[0], ".") && strings.Contains(s, "/")
}
