// Package dockertest gives tests that need a real Docker Engine the engine
// the project's script starts (scripts/docker-test.sh): its socket, or a
// skip saying how to start it, so that every docker test decides the same
// way whether it runs.
package dockertest

import (
	"context"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// Environment variables naming the test engines' sockets, which
// scripts/docker-test.sh starts and prints (.ci/run exports them).
const (
	// EnvSocket is the test engine's: no bridge, containers on the host
	// network.
	EnvSocket = "MESHROLL_TEST_DOCKER_SOCKET"
	// EnvBridgeSocket is the second engine's, with a bridge of its own
	// that routes nothing off the machine (scripts/docker-test.sh
	// --bridge).
	EnvBridgeSocket = "MESHROLL_TEST_DOCKER_BRIDGE_SOCKET"
)

// Socket is the socket env names, which script starts and prints: the
// test skips without one, with one line naming the script, and fails on CI
// (which must run it) or when no engine answers there.
func Socket(t testing.TB, env, script string) string {
	t.Helper()
	socket := os.Getenv(env)
	if socket == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set; CI must run the docker tests (.ci/run starts %s)", env, script)
		}
		t.Skipf("no Docker engine for the docker tests: export %s=\"$(bash %s)\"", env, script)
	}
	if err := ping(socket); err != nil {
		t.Fatalf("the test engine at %s (%s) does not answer (%v); start it with %s", socket, env, err, script)
	}
	if env == EnvBridgeSocket {
		// Its containers change the box's network interfaces: not
		// while a browser loads a page (HoldQuietNetwork).
		holdNetwork(t, false)
	}
	return socket
}

// ping asks the engine at socket whether it answers.
func ping(socket string) error {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	resp, err := hc.Get("http://docker/_ping")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// HoldQuietNetwork waits until no test runs containers on the bridge
// engine, and keeps them from starting until release (or the test's end).
// Every container the bridge engine starts or stops adds or removes a
// network interface on this box, and Chromium fails every request in
// flight when one changes, loopback ones too (net::ERR_NETWORK_CHANGED):
// a page load must not overlap them.
func HoldQuietNetwork(t testing.TB) (release func()) {
	t.Helper()
	return holdNetwork(t, true)
}
