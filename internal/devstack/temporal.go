package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/logging"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/temporalcli"
)

// temporalCLI finds the Temporal CLI the project pins (temporalcli.Find:
// the variable, PATH, GOBIN, GOPATH, then <state>/bin), and says in the
// stack's account which binary it runs, and which of another version it
// passed over (a plain `temporal` may run one of those). With none of the
// pinned version it builds one into <state>/bin with go install, which
// takes minutes the first time, and says so first.
func (s *stack) temporalCLI(ctx context.Context) (string, error) {
	bin := filepath.Join(s.state, "bin")
	f, err := temporalcli.Find(ctx, bin)
	for _, o := range f.Passed {
		s.say("temporal", "passing over %s: the stack runs %s", o, temporalcli.Version)
	}
	if err == nil {
		s.say("temporal", "%s  (Temporal CLI %s, found %s)", s.display(f.Path), f.Version, f.From)
		return f.Path, nil
	}
	if !errors.Is(err, temporalcli.ErrNotFound) {
		return "", err
	}
	logPath := filepath.Join(s.state, "logs", "install-temporal.log")
	s.line(fmt.Sprintf("installing the Temporal CLI %s into %s with go install (none of that version found; "+
		"a few minutes the first time, from the Go build cache after; log %s)",
		temporalcli.Version, s.display(bin), s.display(logPath)))
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", fmt.Errorf("install log: %w", err)
	}
	defer func() { _ = logf.Close() }()
	began := time.Now()
	cli, err := temporalcli.Install(ctx, bin, logf)
	if err != nil {
		return "", err
	}
	s.say("temporal", "%s  (Temporal CLI %s, installed in %s)", s.display(cli), temporalcli.Version, time.Since(began).Round(time.Second))
	return cli, nil
}

// devServer is a running `temporal server start-dev` child process.
type devServer struct {
	cmd *exec.Cmd
	// done is closed once the process has exited; err is its Wait error.
	done chan struct{}
	err  error
	// logPath is the server's log file; logStart is where this run's
	// output begins in it.
	logPath  string
	logStart int64
}

// devServerArgs are the arguments of `temporal server start-dev` for cfg:
// the configured address and namespace, the Web UI port, state in dbFile,
// meshroll's search attributes (so the Web UI and plans can use them) and
// the same fast-matching settings the tests run with.
func devServerArgs(t config.Temporal, uiPort int, dbFile string) ([]string, error) {
	host, port, err := net.SplitHostPort(t.Address)
	if err != nil {
		return nil, fmt.Errorf("temporal.address %q: %w", t.Address, err)
	}
	args := []string{"server", "start-dev",
		"--ip", host, "--port", port, "--ui-port", strconv.Itoa(uiPort),
		"--db-filename", dbFile, "--log-level", "warn",
	}
	// The default namespace always exists; naming it again is refused.
	if t.Namespace != "" && t.Namespace != config.DefaultTemporalNamespace {
		args = append(args, "--namespace", t.Namespace)
	}
	args = append(args, temporalcli.SearchAttributeArgs(meshapi.SearchAttributeTypes)...)
	return append(args, temporalcli.FastDynamicConfig...), nil
}

// startDevServer starts the CLI with args, its output appended to logPath.
func startDevServer(cli string, args []string, logPath string) (*devServer, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("temporal dev server log: %w", err)
	}
	_, _ = fmt.Fprintf(logf, "--- meshroll dev stack %s: %s %s\n", time.Now().Format(time.RFC3339), cli, strings.Join(args, " "))
	start, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("temporal dev server log: %w", err)
	}

	s := &devServer{done: make(chan struct{}), logPath: logPath, logStart: start}
	started := make(chan error, 1)
	go func() {
		// The kernel's parent-death signal (see sysProcAttr) follows the
		// thread that forked the child, not the process: keep that thread
		// for this goroutine until the child has exited.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer func() { _ = logf.Close() }()
		cmd := exec.Command(cli, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = sysProcAttr()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		s.cmd = cmd
		started <- nil
		s.err = cmd.Wait()
		close(s.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start the Temporal dev server (%s): %w", cli, err)
	}
	return s, nil
}

// waitReady waits, up to timeout, until the frontend at address answers and
// knows namespace. It gives up early when the server exits.
func (s *devServer) waitReady(ctx context.Context, address, namespace string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	quiet := logging.Temporal(zerolog.Nop()) // a refused probe is expected, not news
	var last error
	for {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		c, err := client.DialContext(dctx, client.Options{HostPort: address, Namespace: namespace, Logger: quiet})
		if err == nil {
			_, err = c.WorkflowService().DescribeNamespace(dctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
			c.Close()
		}
		cancel()
		if err == nil {
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("the Temporal dev server did not answer on %s (namespace %s) within %s: %w; last lines of %s:\n%s",
				address, namespace, timeout, last, s.logPath, s.tail(15))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return s.exitError("before answering")
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// exitError describes an exit of the server that nobody asked for.
func (s *devServer) exitError(when string) error {
	return fmt.Errorf("the Temporal dev server exited %s (%v); see %s; its last lines:\n%s", when, s.err, s.logPath, s.tail(15))
}

// exited reports whether the server has exited.
func (s *devServer) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stop interrupts the server as Ctrl-C would, gives it grace to finish
// writing its database, and kills it after that.
func (s *devServer) stop(grace time.Duration) error {
	if s.exited() {
		return nil
	}
	if err := interrupt(s.cmd.Process); err != nil && !errors.Is(err, os.ErrProcessDone) {
		_ = s.cmd.Process.Kill()
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(grace):
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.done:
		return fmt.Errorf("the Temporal dev server did not stop within %s of an interrupt and was killed", grace)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the Temporal dev server (pid %d) survived SIGKILL", s.cmd.Process.Pid)
	}
}

// tail is the last n lines this run of the server wrote to its log.
func (s *devServer) tail(n int) string {
	return tailFile(s.logPath, s.logStart, n)
}

// tailFile returns the last n lines of path from offset on, indented so that
// they read as part of the message they end.
func tailFile(path string, offset int64, n int) string {
	const window = 64 << 10
	f, err := os.Open(path)
	if err != nil {
		return "  (" + err.Error() + ")"
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return "  (" + err.Error() + ")"
	}
	from := min(max(offset, fi.Size()-window), fi.Size())
	buf := make([]byte, fi.Size()-from)
	if _, err := f.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return "  (" + err.Error() + ")"
	}
	buf = bytes.TrimRight(buf, "\n")
	if len(bytes.TrimSpace(buf)) == 0 {
		return "  (nothing)"
	}
	lines := bytes.Split(buf, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("  ")
		b.Write(l)
	}
	return b.String()
}
