package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/agent"
)

// removeContainers removes, on the engine at socket (a unix socket's path
// or an http:// URL, as the docker runtime takes it), every container
// labelled for one of machines: the docker runtime leaves its containers
// running when its agent stops, as a deployed agent must, and a bench run
// must leave the engine as it found it.
func removeContainers(ctx context.Context, socket string, machines []string) error {
	base, c := "http://docker", &http.Client{Timeout: 30 * time.Second}
	if strings.HasPrefix(socket, "http://") {
		base = strings.TrimSuffix(socket, "/")
	} else {
		if socket == "" {
			socket = agent.DefaultDockerSocket
		}
		c.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}
	}
	do := func(method, path string, out any) error {
		req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("engine %s %s: %w", method, path, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound {
			return fmt.Errorf("engine %s %s: %s", method, path, resp.Status)
		}
		if out == nil {
			return nil
		}
		return json.NewDecoder(resp.Body).Decode(out)
	}
	var errs []error
	for _, m := range machines {
		f, _ := json.Marshal(map[string][]string{"label": {"io.meshroll.machine=" + m}})
		var listed []struct {
			ID string `json:"Id"`
		}
		if err := do(http.MethodGet, "/containers/json?all=1&filters="+url.QueryEscape(string(f)), &listed); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, ct := range listed {
			errs = append(errs, do(http.MethodDelete, "/containers/"+ct.ID+"?force=1", nil))
		}
	}
	return errors.Join(errs...)
}
