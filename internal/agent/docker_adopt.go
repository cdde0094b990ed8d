package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
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
		if strings.Contains(err.Error(), ": 404 ") {
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
	f, _ := json.Marshal(map[string][]string{"label": {labelMachine + "=" + r.machine}})
	var listed []struct {
		ID     string            `json:"Id"`
		Labels map[string]string `json:"Labels"`
	}
	if err := r.call(ctx, http.MethodGet, "/containers/json?all=1&filters="+url.QueryEscape(string(f)), nil, &listed); err != nil {
		return
	}
	for _, c := range listed {
		if dc, ok := declared[c.Labels[labelModule]]; ok && dc.hash == c.Labels[labelSpec] {
			continue
		}
		r.remove(ctx, c.ID)
	}
}
