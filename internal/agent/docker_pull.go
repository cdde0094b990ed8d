package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/meshroll/meshroll/internal/agent/execrt"
	"github.com/meshroll/meshroll/internal/backoff"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/registry"
)

// WithRegistry has the docker runtime pass o's credentials to the engine
// (the X-Registry-Auth header) when it pulls an image of o's registry, so
// that a registry asking who pulls (the embedded one beyond loopback, with
// the hosts' pull credential) serves the engine too. Images elsewhere are
// pulled as the engine's own configuration says.
func (r *DockerRuntime) WithRegistry(o registry.Options) (*DockerRuntime, error) {
	if o.Address == "" || (o.Username == "" && o.Token == "") {
		return r, nil
	}
	host, err := o.Host()
	if err != nil {
		return nil, fmt.Errorf("runtime docker: registry: %w", err)
	}
	auth := map[string]string{"serveraddress": host}
	if o.Token != "" {
		auth["registrytoken"] = o.Token.Reveal()
	} else {
		auth["username"], auth["password"] = o.Username, o.Password.Reveal()
	}
	b, _ := json.Marshal(auth)
	r.registryHost, r.registryAuth = host, base64.URLEncoding.EncodeToString(b)
	return r, nil
}

// pull has the engine pull ref (image@digest), with the registry's
// credentials when ref is in it.
func (r *DockerRuntime) pull(ctx context.Context, ref string) error {
	var h http.Header
	if r.registryAuth != "" && strings.HasPrefix(ref, r.registryHost+"/") {
		h = http.Header{"X-Registry-Auth": {r.registryAuth}}
	}
	if err := r.callWith(ctx, http.MethodPost, "/images/create?"+url.Values{"fromImage": {ref}}.Encode(), nil, nil, h); err != nil {
		return registry.PullError(ref, err)
	}
	return nil
}

// pullRetrying pulls dc's image (ref) until it is pulled, the registry
// turns it away (registry.PullRetryable) or ctx ends, reporting each failed
// attempt as the container still starting, with why and when it tries
// again, the exec runtime's waits and words: a registry that is down for a
// moment must not read as a broken build, and the push that waits gives up
// at its running_timeout, naming the cause.
func (r *DockerRuntime) pullRetrying(ctx context.Context, dc *dockerContainer, ref string, update func(Update)) error {
	bo := backoff.New(execrt.DefaultBackoffInitial, execrt.DefaultBackoffMax)
	for {
		err := r.pull(ctx, ref)
		if err == nil || ctx.Err() != nil || !registry.PullRetryable(err) {
			return err
		}
		r.report(dc, Update{Module: dc.spec.Module, State: mesh.StateStarting, Reason: fmt.Sprintf("%v; retrying in %s", err, bo.Next())}, update)
		if err := bo.Wait(ctx); err != nil {
			return err
		}
	}
}
