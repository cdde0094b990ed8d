package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Exec runs argv in module's container through the engine's exec API (as
// docker exec does, without a terminal) and waits for it, writing its
// output, stdout and stderr as they came, to out. It returns the command's
// exit code, or an error when it could not run or outlived ctx (the engine
// then still runs it to its end: it has no way to stop an exec).
func (r *DockerRuntime) Exec(ctx context.Context, module string, argv []string, out io.Writer) (int, error) {
	id := r.idOf(module)
	if id == "" {
		return 0, fmt.Errorf("runtime docker: container %s has not started", module)
	}
	var created struct {
		ID string `json:"Id"`
	}
	if err := r.call(ctx, http.MethodPost, "/containers/"+id+"/exec", map[string]any{
		"Cmd": argv, "AttachStdout": true, "AttachStderr": true,
	}, &created); err != nil {
		return 0, fmt.Errorf("runtime docker: exec in %s: %w", module, err)
	}
	resp, err := r.request(ctx, http.MethodPost, "/exec/"+created.ID+"/start", map[string]any{"Detach": false, "Tty": false})
	if err != nil {
		return 0, fmt.Errorf("runtime docker: exec in %s: %w", module, err)
	}
	err = demux(out, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("runtime docker: exec in %s: read output: %w", module, err)
	}
	// The output ends when the command does; the engine may note its exit
	// code a moment later.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var st struct {
			Running  bool `json:"Running"`
			ExitCode int  `json:"ExitCode"`
		}
		if err := r.call(ctx, http.MethodGet, "/exec/"+created.ID+"/json", nil, &st); err != nil {
			return 0, fmt.Errorf("runtime docker: exec in %s: %w", module, err)
		}
		if !st.Running {
			return st.ExitCode, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return 0, fmt.Errorf("runtime docker: exec in %s: %w", module, ctx.Err())
		}
	}
}
