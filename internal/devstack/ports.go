package devstack

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/meshroll/meshroll/internal/config"
)

// bind is one address the dev stack will listen on, with the words a
// person needs when it is taken: which setting asked for it and how to
// change that setting.
type bind struct {
	// addr is the host:port to listen on.
	addr string
	// key names the setting, e.g. "temporal.address" or "--ui-port".
	key string
	// fix says how to pick another address.
	fix string
}

// binds lists every address the stack will listen on, in the order it
// starts them: the dev server's frontend and Web UI, the embedded registry
// (unless registry.address names one elsewhere), the worker's metrics and
// fleet page and merge receiver when served, and one host agent per machine. It refuses a
// config the dev stack cannot serve (an https host, a port of 0 where others
// must find the service) with one line naming the key.
func binds(cfg *config.Config, uiPort int, configPath string) ([]bind, error) {
	host, port, err := net.SplitHostPort(cfg.Temporal.Address)
	if err != nil {
		return nil, fmt.Errorf("temporal.address %q is not host:port (e.g. 127.0.0.1:7233): %w", cfg.Temporal.Address, err)
	}
	if host == "" {
		return nil, fmt.Errorf("temporal.address %q names no host: the dev server binds to it, so give one, e.g. 127.0.0.1%s", cfg.Temporal.Address, cfg.Temporal.Address)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return nil, fmt.Errorf("temporal.address %q needs a fixed port (the worker and the starter find Temporal there), e.g. %s", cfg.Temporal.Address, net.JoinHostPort(host, "7233"))
	}
	if uiPort <= 0 || uiPort > 65535 {
		return nil, fmt.Errorf("--ui-port %d is not a port", uiPort)
	}
	out := []bind{
		{addr: net.JoinHostPort(host, port), key: "temporal.address", fix: change("temporal.address", configPath, "temporal", "address")},
		{addr: net.JoinHostPort(host, strconv.Itoa(uiPort)), key: "--ui-port", fix: "pass another --ui-port"},
	}
	if cfg.Registry.Address == "" {
		out = append(out, bind{addr: cfg.Registry.Listen, key: "registry.listen", fix: change("registry.listen", configPath, "registry", "listen")})
	}
	if l := cfg.Worker.MetricsListen; l != "" {
		out = append(out, bind{addr: l, key: "worker.metrics_listen", fix: change("worker.metrics_listen", configPath, "worker", "metrics_listen") + " or pass another --metrics-listen"})
	}
	if l := cfg.Worker.UIListen; l != "" {
		out = append(out, bind{addr: l, key: "worker.ui_listen", fix: change("worker.ui_listen", configPath, "worker", "ui_listen")})
	}
	if l := cfg.Worker.WebhookListen; l != "" {
		out = append(out, bind{addr: l, key: "worker.webhook_listen", fix: change("worker.webhook_listen", configPath, "worker", "webhook_listen")})
	}
	if l := cfg.Worker.EnrollListen; l != "" {
		out = append(out, bind{addr: l, key: "worker.enroll_listen", fix: change("worker.enroll_listen", configPath, "worker", "enroll_listen")})
	}
	for _, name := range machineOrder(cfg) {
		key := "machines." + name + ".host"
		addr, err := hostListen(cfg.Machines[name].Host)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		out = append(out, bind{addr: addr, key: key, fix: change(key, configPath, "machines", name, "host")})
	}
	seen := map[string]string{}
	for _, b := range out {
		if other, ok := seen[b.addr]; ok {
			return nil, fmt.Errorf("%s and %s both want %s: give each its own port in %s", other, b.key, b.addr, configPath)
		}
		seen[b.addr] = b.key
	}
	return out, nil
}

// hostListen is where the dev stack serves the agent of a machine whose
// host API is at rawURL: the URL's host and port, since the worker finds
// the agent there.
func hostListen(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL: %w", rawURL, err)
	}
	if u.Scheme != "http" {
		return "", fmt.Errorf("%q: the dev stack serves host agents over plain http on loopback; use http://127.0.0.1:<port>", rawURL)
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 {
		return "", fmt.Errorf("%q needs a fixed port (the worker finds the agent there)", rawURL)
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// checkPorts listens on every address once, before anything starts, so that
// a port in use is one line naming it and its setting instead of a stack
// half started. Every listener is held until all are tried, so that two
// spellings of one address (localhost and 127.0.0.1) also collide here.
func checkPorts(bs []bind) error {
	var (
		held  []net.Listener
		inUse []bind
	)
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for _, b := range bs {
		l, err := net.Listen("tcp", b.addr)
		if err == nil {
			held = append(held, l)
			continue
		}
		if errors.Is(err, syscall.EADDRINUSE) {
			inUse = append(inUse, b)
			continue
		}
		return fmt.Errorf("cannot listen on %s (%s): %w; the dev stack serves it on this machine, so %s with an address of this machine", b.addr, b.key, unwrapOp(err), b.fix)
	}
	if len(inUse) == 0 {
		return nil
	}
	b := inUse[0]
	msg := fmt.Sprintf("port %s (%s) is in use: stop what holds it (another dev stack?) or %s", b.addr, b.key, b.fix)
	if len(inUse) > 1 {
		more := make([]string, 0, len(inUse)-1)
		for _, o := range inUse[1:] {
			more = append(more, o.addr+" ("+o.key+")")
		}
		msg += "; also in use: " + strings.Join(more, ", ")
	}
	return errors.New(msg)
}

// unwrapOp drops net.OpError's "listen tcp addr:" prefix, which would
// repeat the address.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// change says how to change a config key, naming the environment variable
// instead when one overrides the file.
func change(key, configPath string, parts ...string) string {
	env := envName(parts...)
	if os.Getenv(env) != "" {
		return fmt.Sprintf("change %s (it overrides %s in %s)", env, key, configPath)
	}
	return fmt.Sprintf("change %s in %s", key, configPath)
}

// envName is the MESHROLL_* variable that overrides the key made of parts,
// spelt as package config reads it.
func envName(parts ...string) string {
	r := strings.NewReplacer(".", "_", "-", "_")
	return r.Replace(strings.ToUpper(config.EnvPrefix + "_" + strings.Join(parts, "_")))
}
