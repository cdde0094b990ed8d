package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/devlaunch"
	"github.com/meshroll/meshroll/internal/fleetui"
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

// devServer is the stack's Temporal dev server: the process devlaunch
// started and watches, and the log file its output goes to.
type devServer struct {
	*devlaunch.Process
	// logPath is the server's log file; logStart is where this run's
	// output begins in it.
	logPath  string
	logStart int64
}

// devServerArgs are the arguments after `temporal server start-dev --ip
// <host> --port <port>` for cfg: the namespace, the Web UI port, state in
// dbFile, meshroll's search attributes (so the Web UI and plans can use
// them) and the same fast-matching settings the tests run with. When the
// worker serves the fleet page, the Web UI decodes payloads there (its
// codec endpoint), so that it shows large payloads as the JSON they are.
func devServerArgs(cfg *config.Config, uiPort int, dbFile string) []string {
	t := cfg.Temporal
	args := []string{"--ui-port", strconv.Itoa(uiPort), "--db-filename", dbFile, "--log-level", "warn"}
	if l := cfg.Worker.UIListen; l != "" {
		args = append(args, "--ui-codec-endpoint", "http://"+dialable(l)+fleetui.CodecPath)
	}
	// The default namespace always exists; naming it again is refused.
	if t.Namespace != "" && t.Namespace != config.DefaultTemporalNamespace {
		args = append(args, "--namespace", t.Namespace)
	}
	args = append(args, temporalcli.SearchAttributeArgs(meshapi.SearchAttributeTypes)...)
	return append(args, temporalcli.FastDynamicConfig...)
}

// startDevServer starts the CLI on the configured address, never another,
// its output appended to logPath, and waits until it answers and knows the
// configured namespace. The server is in a process group of its own, so
// that Ctrl-C reaches only the stack, which stops it last, after the
// worker; and it dies with the stack should the stack die without stopping
// it, so that no orphaned server keeps the ports. A start that fails names
// the log and ends with its last lines.
func (s *stack) startDevServer(ctx context.Context, cli, logPath string) (*devServer, error) {
	t := s.cfg.Temporal
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("temporal dev server log: %w", err)
	}
	_, _ = fmt.Fprintf(logf, "--- meshroll dev stack %s\n", time.Now().Format(time.RFC3339))
	start, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("temporal dev server log: %w", err)
	}
	proc, c, err := devlaunch.Launch(ctx, devlaunch.Options{
		CLI:      cli,
		HostPort: t.Address,
		Args:     devServerArgs(s.cfg, s.o.UIPort, filepath.Join(s.state, "temporal.db")),
		// A refused probe is expected, not news; the stack dials its own
		// client, as the worker does, once the server answers.
		Client:          client.Options{Namespace: t.Namespace, Logger: logging.Temporal(zerolog.Nop())},
		Out:             logf,
		Timeout:         s.o.StartTimeout,
		StopGrace:       s.o.StopGrace,
		OwnProcessGroup: true,
		DieWithParent:   true,
	})
	if err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("%w; see %s; its last lines:\n%s", err, logPath, tailFile(logPath, start, 15))
	}
	c.Close()
	srv := &devServer{Process: proc, logPath: logPath, logStart: start}
	s.onStop("Temporal dev server", func() error {
		err := srv.Stop()
		_ = logf.Close()
		return err
	})
	return srv, nil
}

// exitError describes an exit of the server that nobody asked for.
func (s *devServer) exitError(when string) error {
	return fmt.Errorf("the Temporal dev server exited %s (%w); see %s; its last lines:\n%s", when, s.ExitErr(), s.logPath, tailFile(s.logPath, s.logStart, 15))
}

// tailFile returns the last n lines the server wrote to path from offset
// on, indented so that they read as part of the message they end. Lines of
// ours (the run's header, devlaunch's marks, which name the whole command
// line) begin "--- " and are left out: the message is about the server.
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
	var lines [][]byte
	for l := range bytes.SplitSeq(bytes.TrimRight(buf, "\n"), []byte("\n")) {
		if !bytes.HasPrefix(l, []byte("--- ")) {
			lines = append(lines, l)
		}
	}
	if len(bytes.TrimSpace(bytes.Join(lines, nil))) == 0 {
		return "  (nothing)"
	}
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
