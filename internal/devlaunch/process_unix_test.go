//go:build unix

package devlaunch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/syncbuf"
)

// fakeCLI writes a shell script standing in for the Temporal CLI: it
// writes its pid to pidFile and runs script (which never answers as a
// server would).
func fakeCLI(t *testing.T, script string) (cli, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	cli, pidFile = filepath.Join(dir, "temporal"), filepath.Join(dir, "pid")
	require.NoError(t, os.WriteFile(cli, fmt.Appendf(nil, "#!/bin/sh\necho $$ > %q\n%s\n", pidFile, script), 0o755))
	return cli, pidFile
}

// readPid waits for the fake CLI to have written its pid.
func readPid(t *testing.T, pidFile string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(pidFile)
		if n, cerr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && cerr == nil {
			return n
		}
		require.True(t, time.Now().Before(deadline), "the fake CLI wrote no pid")
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid is a process that has not exited (a zombie
// counts as exited).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: the signal answered
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// A server that exits at once fails the launch at once, saying how it
// exited, and not at the timeout.
func TestExitBeforeAnsweringFailsAtOnce(t *testing.T) {
	cli, _ := fakeCLI(t, `echo "fake: cannot open database" >&2; exit 3`)
	var out syncbuf.Buffer
	began := time.Now()
	_, _, err := Launch(context.Background(), Options{CLI: cli, HostPort: "127.0.0.1:1", Out: &out, Timeout: 10 * time.Minute})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the Temporal dev server exited before answering (exit status 3)")
	assert.NotErrorIs(t, err, ErrAddressInUse)
	assert.Less(t, time.Since(began), time.Minute)
	assert.Contains(t, out.String(), "fake: cannot open database")
	assert.Contains(t, out.String(), "starting "+cli+" server start-dev on 127.0.0.1:1 ()")
}

// A server that never answers is given up on at the timeout, which the
// error names with the address and namespace, and is stopped.
func TestNoAnswerWithinTimeout(t *testing.T) {
	cli, pidFile := fakeCLI(t, `exec sleep 60`)
	_, _, err := Launch(context.Background(), Options{CLI: cli, HostPort: "127.0.0.1:1", Timeout: time.Second, StopGrace: 5 * time.Second,
		Client: client.Options{Namespace: "mesh"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the Temporal dev server did not answer on 127.0.0.1:1 (namespace mesh) within 1s")
	assert.False(t, alive(readPid(t, pidFile)), "the server was stopped")
}

// ctx ending while the server starts stops it, and the error is ctx's.
func TestContextEndsTheLaunch(t *testing.T) {
	cli, pidFile := fakeCLI(t, `exec sleep 60`)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, _, err := Launch(ctx, Options{CLI: cli, HostPort: "127.0.0.1:1", StopGrace: 5 * time.Second})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(began), 15*time.Second)
	assert.False(t, alive(readPid(t, pidFile)), "the server was stopped")
}

// A server that ignores the interrupt is killed after the grace, and Stop
// says so.
func TestStopKillsAfterGrace(t *testing.T) {
	// The pid fakeCLI writes comes before the trap; this one after it, so
	// that the interrupt is sent to a server that ignores it.
	ignoring := filepath.Join(t.TempDir(), "ignoring")
	cli, _ := fakeCLI(t, fmt.Sprintf(`trap "" INT; echo $$ > %q; exec sleep 60`, ignoring))
	p := &Process{Child: Child{cmd: exec.Command(cli), done: make(chan struct{})}, grace: 500 * time.Millisecond}
	require.NoError(t, p.start(false))
	readPid(t, ignoring)
	err := p.Stop()
	require.EqualError(t, err, "the Temporal dev server did not stop within 500ms of an interrupt and was killed")
	select {
	case <-p.Done():
	default:
		t.Fatal("Done is not closed after Stop")
	}
	assert.Error(t, p.ExitErr())
}

// StartChild's Kill kills the process and waits for it; Done and ExitErr
// then say it is gone, and a second Kill is no error.
func TestChildKill(t *testing.T) {
	cli, pidFile := fakeCLI(t, `trap "" INT TERM; exec sleep 60`)
	c, err := StartChild(exec.Command(cli), ChildOptions{})
	require.NoError(t, err)
	pid := readPid(t, pidFile)
	require.Equal(t, c.Pid(), pid)
	require.NoError(t, c.ExitErr())
	require.NoError(t, c.Kill(10*time.Second))
	select {
	case <-c.Done():
	default:
		t.Fatal("Done is not closed after Kill")
	}
	assert.Error(t, c.ExitErr())
	assert.False(t, alive(pid))
	assert.NoError(t, c.Kill(time.Second))
}

// OwnProcessGroup puts the server in a group of its own, which the
// terminal's Ctrl-C to the caller's group does not reach.
func TestOwnProcessGroup(t *testing.T) {
	for _, own := range []bool{false, true} {
		cli, pidFile := fakeCLI(t, `exec sleep 60`)
		cmd := exec.Command(cli)
		cmd.SysProcAttr = sysProcAttr(own, false)
		p := &Process{Child: Child{cmd: cmd, done: make(chan struct{})}, grace: 5 * time.Second}
		require.NoError(t, p.start(false))
		pid := readPid(t, pidFile)
		pgid, err := syscall.Getpgid(pid)
		require.NoError(t, err)
		if own {
			assert.Equal(t, pid, pgid)
		} else {
			assert.Equal(t, syscall.Getpgrp(), pgid)
		}
		require.NoError(t, p.Stop())
	}
}

// DieWithParent: a caller that dies without stopping its server takes the
// server with it. The caller is this test binary run again as a helper
// that launches and exits at once.
// StartChild's DieWithParent is the same: a process that is not a dev
// server (the production topology's temporal-server) dies with its caller.
func TestDieWithParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	for _, how := range []string{"launch", "child"} {
		t.Run(how, func(t *testing.T) {
			cli, pidFile := fakeCLI(t, `exec sleep 60`)
			cmd := exec.Command(os.Args[0], "-test.run=^TestDieWithParentHelper$")
			cmd.Env = append(os.Environ(), "DEVLAUNCH_HELPER_CLI="+cli, "DEVLAUNCH_HELPER_PIDFILE="+pidFile, "DEVLAUNCH_HELPER_HOW="+how)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the helper exits 7 without stopping its server: %s", out)
			pid := readPid(t, pidFile)
			deadline := time.Now().Add(10 * time.Second)
			for alive(pid) {
				require.True(t, time.Now().Before(deadline), "the server (pid %d) outlived its caller", pid)
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestDieWithParentHelper is TestDieWithParent's caller; it does nothing
// in a plain run.
func TestDieWithParentHelper(t *testing.T) {
	cli := os.Getenv("DEVLAUNCH_HELPER_CLI")
	if cli == "" {
		t.Skip("helper of TestDieWithParent")
	}
	if os.Getenv("DEVLAUNCH_HELPER_HOW") == "child" {
		_, err := StartChild(exec.Command(cli), ChildOptions{DieWithParent: true})
		require.NoError(t, err)
	} else {
		go func() {
			_, _, _ = Launch(context.Background(), Options{CLI: cli, HostPort: "127.0.0.1:1", DieWithParent: true})
		}()
	}
	readPid(t, os.Getenv("DEVLAUNCH_HELPER_PIDFILE"))
	os.Exit(7)
}

// A file as Out is the server's own stdout and stderr: what it wrote is
// there, and a bind it failed is still told from another failure.
func TestFileOut(t *testing.T) {
	for _, tc := range []struct {
		say   string
		inUse bool
	}{
		{"listen tcp 127.0.0.1:7233: bind: address already in use", true},
		{"cannot open database", false},
	} {
		cli, _ := fakeCLI(t, fmt.Sprintf("echo %q >&2; exit 1", tc.say))
		path := filepath.Join(t.TempDir(), "temporal.log")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		require.NoError(t, err)
		_, err = f.WriteString("an earlier run: address already in use\n")
		require.NoError(t, err)
		w, _ := output(f)
		assert.True(t, w == io.Writer(f), "the file itself, not a pipe to it")
		_, _, err = Launch(context.Background(), Options{CLI: cli, HostPort: "127.0.0.1:1", Out: f})
		require.NoError(t, f.Close())
		require.Error(t, err)
		assert.Equal(t, tc.inUse, errors.Is(err, ErrAddressInUse), "%s: only this run's output counts", tc.say)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Contains(t, string(b), "starting "+cli+" server start-dev on 127.0.0.1:1")
		assert.True(t, strings.HasSuffix(string(b), tc.say+"\n"), string(b))
	}
}
