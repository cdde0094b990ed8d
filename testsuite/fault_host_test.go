package testsuite

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// hostProc is the real host binary serving one machine on its state
// directory with the exec runtime, pulling from the stack's registry (or
// with runtimeArgs' runtime).
// It is started again on the same directory after a kill; its faultProxy
// keeps the worker's view of its address stable.
type hostProc struct {
	t       *testing.T
	bin     string
	machine string
	state   string
	regAddr string
	proxy   *faultProxy
	log     *dsBuffer
	cmd     *exec.Cmd
	done    chan struct{}
	addr    string
	starts  int
	// runtimeArgs, when set, replace the exec runtime's flags.
	runtimeArgs []string
}

func newHostProc(t *testing.T, bin, machine, regAddr string, p *faultProxy, runtimeArgs ...string) *hostProc {
	t.Helper()
	h := &hostProc{t: t, bin: bin, machine: machine, state: t.TempDir(), regAddr: regAddr, proxy: p, log: &dsBuffer{}, runtimeArgs: runtimeArgs}
	t.Cleanup(func() {
		h.stop()
		if t.Failed() {
			t.Logf("host %s's log (last lines):\n%s", machine, dsLastLines(h.log.String(), 40))
		}
	})
	h.start()
	return h
}

// start runs the binary on the state directory and points the proxy at it
// once it listens.
func (h *hostProc) start() {
	h.t.Helper()
	h.starts++
	rt := h.runtimeArgs
	if rt == nil {
		rt = []string{"--runtime", "exec", "--registry", h.regAddr, "--registry-insecure", "--exec-healthy-after", "200ms", "--exec-stop-grace", "5s"}
	}
	h.cmd = exec.Command(h.bin, append([]string{"--machine", h.machine, "--listen", "127.0.0.1:0", "--state", h.state, "--log-format", "json"}, rt...)...)
	h.cmd.Env = cleanHostEnv()
	pipe, err := h.cmd.StderrPipe()
	require.NoError(h.t, err)
	require.NoError(h.t, h.cmd.Start())
	h.done = make(chan struct{})
	addr := make(chan string, 1)
	cmd, done, log := h.cmd, h.done, h.log
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			_, _ = log.Write([]byte(line + "\n"))
			var l struct{ Message, Address string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Message == "host agent listening" {
				addr <- l.Address
			}
		}
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case h.addr = <-addr:
	case <-done:
		h.t.Fatalf("host %s exited before listening:\n%s", h.machine, dsLastLines(h.log.String(), 20))
	case <-time.After(time.Minute):
		h.t.Fatalf("host %s did not report listening within a minute", h.machine)
	}
	h.proxy.setBackend("http://" + h.addr)
}

// kill SIGKILLs the agent and waits until it is gone; the exec runtime's
// processes die with it (parent-death signal), docker's containers do not.
func (h *hostProc) kill() {
	h.t.Helper()
	_ = h.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-h.done:
	case <-time.After(time.Minute):
		h.t.Errorf("host %s did not exit within a minute of SIGKILL", h.machine)
	}
	h.proxy.setBackend("http://127.0.0.1:1")
	_, _ = h.log.Write([]byte("--- SIGKILLed ---\n"))
}

func (h *hostProc) stop() {
	if h.cmd == nil || h.cmd.Process == nil {
		return
	}
	stopGently(h.cmd.Process, h.done, syscall.SIGTERM)
}

func (h *hostProc) client() *host.HTTPClient {
	h.t.Helper()
	c, err := host.NewHTTPClient("http://"+h.addr, "", nil)
	require.NoError(h.t, err)
	return c
}

func (h *hostProc) report() mesh.Report {
	h.t.Helper()
	rep, err := h.client().Report(context.Background())
	require.NoError(h.t, err)
	return rep
}

// containerLog is what the module's processes printed on this machine.
func (h *hostProc) containerLog(module string) string {
	b, _ := os.ReadFile(filepath.Join(h.state, "logs", module+".log"))
	return string(b)
}

// cleanHostEnv is the environment without MESHROLL_ settings.
func cleanHostEnv() []string { return dsEnv("") }

// A host agent — the real binary with the exec runtime, running images
// built by the plan — is SIGKILLed while a plan pushes to it: once after it
// journalled the declaration and before its answer left (the worker never
// hears it), once after the answer while the new process is starting.
// Each time it is started again on the same state directory. The plans
// converge, the journal holds each declaration applied once, and the
// machine runs the newest build.
func TestFaultHostKilledMidApply(t *testing.T) {
	t.Parallel()
	o := stackOptions{faults: true, noAgents: true,
		images:   true,
		modules:  []string{"host"},
		machines: []machineSpec{{name: "edge-1", tier: 1, modules: []string{"host"}}},
	}
	fs := newStack(t, o)
	bin := filepath.Join(dsBuild(t, "host"), "host")
	h := newHostProc(t, bin, "edge-1", fs.regAddr, fs.proxies["edge-1"])
	fs.workers.start()

	first := fs.wait(fs.start("host", fs.commit("host")).ID)
	require.Equal(t, meshapi.PlanConverged, first.State, first.Reason)

	cases := []struct {
		name  string
		relay bool // the answer reaches the worker before the kill takes effect
	}{
		{"journalled, answer lost", false},
		{"answered, starting", true},
	}
	for i, tc := range cases {
		var fired atomic.Bool
		killed := make(chan struct{})
		fs.proxies["edge-1"].setHook(func(ev proxyEvent) proxyAction {
			if !ev.Answer || ev.Status != 200 || !fired.CompareAndSwap(false, true) {
				return relay
			}
			h.kill()
			close(killed)
			if tc.relay {
				return relay
			}
			return drop
		})
		commit := fs.commit("host")
		id := fs.start("host", commit).ID
		select {
		case <-killed:
		case <-time.After(3 * time.Minute):
			t.Fatalf("%s: the plan never sent its declaration; it is %s", tc.name, fs.planState(id).State)
		}
		fs.proxies["edge-1"].setHook(nil)
		h.start()
		st := fs.wait(id)
		require.Equal(t, meshapi.PlanConverged, st.State, "%s: %s", tc.name, st.Reason)
		rep := h.report()
		runsBuild(t, "edge-1", rep, *st.Build)
		require.Equal(t, uint64(i+2), rep.LastSeq, "%s: one declaration per plan", tc.name)
		version := strings.Repeat("x", i+3)
		eventually(t, time.Minute, "edge-1's host process printing version "+version, func() bool {
			return strings.Contains(h.containerLog("host"), "host "+version+"\n")
		})
	}
	tl := tallyJournal(t, "edge-1", journalOver(t, h.client()))
	require.Equal(t, 3, tl.applied, "three plans, three applies")
	require.Zero(t, tl.doubles)
	require.Zero(t, tl.downgrades)
	t.Logf("host kills: %d, host starts %d; applied %d, double applies %d, downgrades %d", len(cases), h.starts, tl.applied, tl.doubles, tl.downgrades)
}
