package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"

	"github.com/meshroll/meshroll/internal/mesh"
)

// containerName is the engine's name for a machine's container of a
// module and spec: the same spec gets the same name, which is how an agent
// started again finds the container an earlier one created.
func containerName(machine, module, hash string) string {
	return fmt.Sprintf("meshroll-%s-%s-%s", machine, module, hash[:12])
}

// adopt finds the container named name, created by a runtime of this
// machine for the spec hash (an earlier agent's, left running when it
// stopped), starts it if it is not running, and returns its ID; "" when
// there is none. A container of that name meshroll did not create for
// this spec is an error, and is left alone.
func (r *DockerRuntime) adopt(ctx context.Context, name, hash string) (string, error) {
	var found struct {
		ID     string `json:"Id"`
		Config struct {
			Labels map[string]string `json:"Labels"`
		} `json:"Config"`
		State struct {
			Running bool `json:"Running"`
		} `json:"State"`
	}
	resp, err := r.request(ctx, http.MethodGet, "/containers/"+url.PathEscape(name)+"/json", nil)
	if err != nil {
		if isNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("look for container %s: %w", name, err)
	}
	err = json.NewDecoder(resp.Body).Decode(&found)
	resp.Body.Close()
	if err != nil {
		return "", fmt.Errorf("look for container %s: %w", name, err)
	}
	if found.Config.Labels[labelMachine] != r.machine || found.Config.Labels[labelSpec] != hash {
		return "", fmt.Errorf("a container named %s that meshroll did not create for this declaration is on the engine; remove or rename it", name)
	}
	if !found.State.Running {
		if err := r.call(ctx, http.MethodPost, "/containers/"+found.ID+"/start", nil, nil); err != nil {
			return "", fmt.Errorf("start container %s again: %w", name, err)
		}
	}
	return found.ID, nil
}

// sweep removes the containers labelled for this machine whose module
// and spec declared (the first declaration this runtime took) does not
// name: ones an earlier agent left when it stopped mid-replace, or whose
// module was dropped while no agent ran. Containers without meshroll's
// labels for this machine are never touched.
func (r *DockerRuntime) sweep(ctx context.Context, declared map[string]*dockerContainer) {
	defer r.wg.Done()
	listed, err := r.labelled(ctx)
	if err != nil {
		return
	}
	for _, c := range listed {
		if dc, ok := declared[c.Labels[labelModule]]; ok && dc.hash == c.Labels[labelSpec] {
			continue
		}
		r.remove(ctx, c.ID)
	}
}

// labelledContainer is a container of the engine's list.
type labelledContainer struct {
	ID      string            `json:"Id"`
	Labels  map[string]string `json:"Labels"`
	State   string            `json:"State"`
	Created int64             `json:"Created"`
}

// labelled lists the engine's containers labelled for this machine,
// running or not.
func (r *DockerRuntime) labelled(ctx context.Context) ([]labelledContainer, error) {
	f, _ := json.Marshal(map[string][]string{"label": {labelMachine + "=" + r.machine}})
	var listed []labelledContainer
	if err := r.call(ctx, http.MethodGet, "/containers/json?all=1&filters="+url.QueryEscape(string(f)), nil, &listed); err != nil {
		return nil, fmt.Errorf("list containers of %s: %w", r.machine, err)
	}
	return listed, nil
}

// Purge force-removes every container labelled for this machine, declared
// or not, without a stop grace: for a machine leaving the engine for good,
// and a bench leaving the engine as it found it. An agent never purges:
// Close leaves what runs running, as an upgrade needs.
func (r *DockerRuntime) Purge(ctx context.Context) error {
	listed, err := r.labelled(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range listed {
		if err := r.call(ctx, http.MethodDelete, "/containers/"+c.ID+"?force=1", nil, nil); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s of %s: %w", c.ID, r.machine, err))
		}
	}
	return errors.Join(errs...)
}

// Find is what this machine's earlier agents left on the engine, as each
// container was declared (its labelDeclared label): one container per
// module, the running one, else the newest, where an agent stopped
// mid-replace left two. A container whose label does not match its spec
// hash is passed over, and left alone. See Finder.
func (r *DockerRuntime) Find(ctx context.Context) ([]mesh.Container, error) {
	listed, err := r.labelled(ctx)
	if err != nil {
		return nil, fmt.Errorf("find containers left running: %w", err)
	}
	type candidate struct {
		spec    mesh.Container
		running bool
		created int64
	}
	best := map[string]candidate{}
	for _, c := range listed {
		var spec mesh.Container
		if json.Unmarshal([]byte(c.Labels[labelDeclared]), &spec) != nil ||
			spec.Module != c.Labels[labelModule] || spec.SpecHash() != c.Labels[labelSpec] {
			continue
		}
		cand := candidate{spec: spec, running: c.State == "running", created: c.Created}
		cur, ok := best[spec.Module]
		if !ok || cand.running && !cur.running || cand.running == cur.running && cand.created > cur.created {
			best[spec.Module] = cand
		}
	}
	out := make([]mesh.Container, 0, len(best))
	for _, m := range slices.Sorted(maps.Keys(best)) {
		out = append(out, best[m].spec)
	}
	return out, nil
}
