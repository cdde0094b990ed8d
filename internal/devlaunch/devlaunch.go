// Package devlaunch starts the Temporal CLI's dev server (`temporal server
// start-dev`) as a child process, waits until it answers, watches it, and
// stops it: the one launcher of that server, for the tests' servers
// (package devserver), the bench's and the dev stack's (`worker --dev`).
//
// It exists because the SDK's testsuite.StartDevServer keeps dialling for a
// minute after the server has exited, and a server whose port was picked
// free but taken before it bound it exits at once: on a box running tests
// in parallel, where every server's internal ports are picked the same way,
// that happens. Launch notices the exit, and when it picked the port itself
// it picks another and starts again. It is one package rather than one per
// caller so that a start that fails is noticed, and said, the same way
// everywhere. StartChild lends its way of starting a process that dies
// with its caller to another server, the production topology's (package
// prodserver).
package devlaunch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/payloads"
)

// Attempts bounds the starts on fresh ports when the one picked was taken
// before the server bound it.
const Attempts = 4

// Defaults of Options.
const (
	// DefaultTimeout bounds one attempt: the CLI's first start on a loaded
	// box can take a minute.
	DefaultTimeout = 2 * time.Minute
	// DefaultStopGrace is how long Stop lets the server finish writing its
	// database after an interrupt before it kills it.
	DefaultStopGrace = time.Minute
)

// killWait bounds the wait for a server killed after its grace: a process
// that outlives SIGKILL that long is reported rather than waited for.
const killWait = 10 * time.Second

// ErrAddressInUse marks a start that failed because the server could not
// bind one of its addresses.
var ErrAddressInUse = errors.New("address already in use")

// Options says how to start a dev server.
type Options struct {
	// CLI is the temporal binary.
	CLI string
	// HostPort is the frontend's address. Empty picks a free loopback port,
	// and another when that one was taken before the server bound it; an
	// address named here is never swapped for another.
	HostPort string
	// Args follow `temporal server start-dev --ip <host> --port <port>`:
	// the namespace, the Web UI's port or --headless, a --db-filename to
	// persist to, dynamic config, search attributes.
	Args []string
	// Client is how to dial the server; Launch sets its HostPort. The
	// server is ready once a client dials and its Namespace (default
	// "default") is known.
	Client client.Options
	// Out takes the server's output and a line per attempt (Mark). A
	// file is written by the server itself (see output).
	Out io.Writer
	// Timeout bounds one attempt (default DefaultTimeout).
	Timeout time.Duration
	// StopGrace is the server's time to stop after an interrupt before it
	// is killed (default DefaultStopGrace).
	StopGrace time.Duration
	// OwnProcessGroup starts the server in a process group of its own
	// (where there are process groups), so that the terminal's Ctrl-C
	// reaches only the caller, which stops the server when it chooses: the
	// dev stack stops it last, after the worker that uses it.
	OwnProcessGroup bool
	// DieWithParent asks the kernel (Linux; elsewhere it is not done) to
	// send the server SIGTERM should the caller die without stopping it,
	// so that no orphaned server keeps the ports. It holds an OS thread
	// while the server runs: the signal follows the thread that started
	// the server, not the process.
	DieWithParent bool
}

// Process is a dev server Launch started.
type Process struct {
	// Child gives the process's Pid, Done and ExitErr.
	Child
	hostPort string
	grace    time.Duration
}

// PickHostPort picks the address of a server whose options name none; a
// variable so that a test can hand out a taken one.
var PickHostPort = FreeHostPort

// FreeHostPort is a loopback address no one listened on a moment ago.
func FreeHostPort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// Launch starts the server and returns it with a client dialled to it. A
// server that exits before it answers fails the launch at once, not at the
// timeout; so does ctx ending. A failed launch leaves no process behind.
func Launch(ctx context.Context, o Options) (*Process, client.Client, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	fixed := o.HostPort != ""
	for attempt := 1; ; attempt++ {
		if !fixed {
			hp, err := PickHostPort()
			if err != nil {
				return nil, nil, err
			}
			o.HostPort = hp
		}
		p, c, err := launch(ctx, o)
		if err == nil || fixed || attempt == Attempts || !errors.Is(err, ErrAddressInUse) {
			return p, c, err
		}
		Mark(o.Out, fmt.Sprintf("an address was taken before the server bound it (attempt %d of %d); starting again on another port", attempt, Attempts))
	}
}

func launch(ctx context.Context, o Options) (*Process, client.Client, error) {
	host, port, err := net.SplitHostPort(o.HostPort)
	if err != nil {
		return nil, nil, fmt.Errorf("address %q: %w", o.HostPort, err)
	}
	args := append([]string{"server", "start-dev", "--ip", host, "--port", port}, o.Args...)
	Mark(o.Out, fmt.Sprintf("starting %s server start-dev on %s (%s)", o.CLI, o.HostPort, strings.Join(o.Args, " ")))
	cmd := exec.Command(o.CLI, args...)
	out, bindFailed := output(o.Out)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr(o.OwnProcessGroup, o.DieWithParent)
	p := &Process{Child: Child{cmd: cmd, done: make(chan struct{})}, hostPort: o.HostPort, grace: o.StopGrace}
	if err := p.start(o.DieWithParent); err != nil {
		return nil, nil, fmt.Errorf("start the Temporal dev server (%s): %w", o.CLI, err)
	}

	tctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	co := o.Client
	co.HostPort = o.HostPort
	if co.Namespace == "" {
		co.Namespace = client.DefaultNamespace
	}
	c, err := p.waitReady(tctx, co)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("the Temporal dev server was starting: %w", ctx.Err())
		} else if tctx.Err() != nil {
			err = fmt.Errorf("the Temporal dev server did not answer on %s (namespace %s) within %s: %w", o.HostPort, co.Namespace, o.Timeout, err)
		}
		_ = p.Stop()
		if bindFailed() {
			err = fmt.Errorf("%w: %w", ErrAddressInUse, err)
		}
		return nil, nil, err
	}
	Mark(o.Out, "server ready")
	return p, c, nil
}

// start has a goroutine start the process and wait for it (startWaited).
func (p *Process) start(lockThread bool) error {
	return startWaited(p.cmd, lockThread, p.done, &p.err)
}

// startWaited has a goroutine start cmd and wait for it, setting *waitErr
// and closing done once it has exited. With lockThread that goroutine
// keeps its OS thread until the process has exited, since the parent-death
// signal follows the thread that started it.
func startWaited(cmd *exec.Cmd, lockThread bool, done chan struct{}, waitErr *error) error {
	started := make(chan error, 1)
	go func() {
		if lockThread {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		*waitErr = cmd.Wait()
		close(done)
	}()
	return <-started
}

// ChildOptions say how StartChild starts a process: Options'
// OwnProcessGroup and DieWithParent, for a process that is not a dev
// server.
type ChildOptions struct {
	// OwnProcessGroup is Options.OwnProcessGroup.
	OwnProcessGroup bool
	// DieWithParent is Options.DieWithParent: the kernel (Linux) sends the
	// process SIGTERM should the caller die without stopping it, even by
	// SIGKILL or a test binary's timeout.
	DieWithParent bool
}

// Child is a process StartChild started, waited for by a goroutine of its
// own. It exists so that another server than the dev server (the
// production topology's temporal-server, package prodserver) dies with its
// caller by the same mechanism, rather than by a copy of it.
type Child struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartChild starts cmd as Launch starts a dev server (its SysProcAttr is
// set from o; the parent-death signal holds an OS thread while it runs) and
// waits for it in the background. The caller stops it (Kill, Signal) and
// reads Done and ExitErr.
func StartChild(cmd *exec.Cmd, o ChildOptions) (*Child, error) {
	cmd.SysProcAttr = sysProcAttr(o.OwnProcessGroup, o.DieWithParent)
	c := &Child{cmd: cmd, done: make(chan struct{})}
	if err := startWaited(cmd, o.DieWithParent, c.done, &c.err); err != nil {
		return nil, err
	}
	return c, nil
}

// Pid is the process's id, for reading its usage.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Done is closed once the process has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// ExitErr is why the process exited, once Done is closed: its wait error,
// or "exit status 0" (never nil, so that it can be wrapped into a message
// saying the process is gone). Before that it is nil.
func (c *Child) ExitErr() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	if c.err == nil {
		return errors.New("exit status 0")
	}
	return c.err
}

// Kill kills the process (SIGKILL) and waits for it to exit, for at most
// wait. A process already gone is no error.
func (c *Child) Kill(wait time.Duration) error {
	select {
	case <-c.done:
		return nil
	default:
	}
	if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill pid %d: %w", c.cmd.Process.Pid, err)
	}
	select {
	case <-c.done:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("pid %d survived SIGKILL for %s", c.cmd.Process.Pid, wait)
	}
}

// waitReady dials the frontend until it answers and knows co's namespace,
// the process exits, or ctx ends; the error is the last dial's, or the
// exit.
func (p *Process) waitReady(ctx context.Context, co client.Options) (client.Client, error) {
	var last error
	for {
		c, err := dial(ctx, co)
		if err == nil {
			return c, nil
		}
		last = err
		select {
		case <-p.done:
			return nil, fmt.Errorf("the Temporal dev server exited before answering (%w)", p.ExitErr())
		case <-ctx.Done():
			return nil, last
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dial is one try: a client, and the namespace described through it (the
// frontend answers before the namespaces named at start exist).
func dial(ctx context.Context, co client.Options) (client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if co.ConnectionOptions.GrpcCompression == nil {
		// The dev server is on loopback, where gzip (the SDK's default)
		// costs CPU on both sides and saves nothing.
		co.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	if co.DataConverter == nil {
		// The worker on this server writes payloads as every meshroll
		// process does.
		co.DataConverter = payloads.Converter
	}
	c, err := client.DialContext(dctx, co)
	if err != nil {
		return nil, err
	}
	if _, err := c.WorkflowService().DescribeNamespace(dctx, &workflowservice.DescribeNamespaceRequest{Namespace: co.Namespace}); err != nil {
		c.Close()
		return nil, fmt.Errorf("namespace %s: %w", co.Namespace, err)
	}
	return c, nil
}

// HostPort is the frontend's address.
func (p *Process) HostPort() string { return p.hostPort }

// Stop interrupts the server as Ctrl-C would and waits for it to exit; it
// kills it after the options' StopGrace. An exit already over, or caused by
// the interrupt, is no error.
func (p *Process) Stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := interrupt(p.cmd.Process); err != nil && !errors.Is(err, os.ErrProcessDone) {
		_ = p.cmd.Process.Kill()
	}
	select {
	case <-p.done:
		var ee *exec.ExitError
		if errors.As(p.err, &ee) && !ee.Exited() { // killed by the signal we sent
			return nil
		}
		return p.err
	case <-time.After(p.grace):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return fmt.Errorf("the Temporal dev server did not stop within %s of an interrupt and was killed", p.grace)
	case <-time.After(killWait):
		return fmt.Errorf("the Temporal dev server (pid %d) survived SIGKILL", p.cmd.Process.Pid)
	}
}

// Mark writes a line of ours into the server's output, timed.
func Mark(w io.Writer, msg string) {
	_, _ = fmt.Fprintf(w, "--- devserver %s: %s\n", time.Now().Format("15:04:05.000"), msg)
}

// bindFailPhrase is how the server says it could not bind an address.
var bindFailPhrase = []byte("address already in use")

// output is what the server writes to for out, and a function that says,
// once the server has exited, whether it failed to bind an address. A file
// (a regular one) is handed to the server as it is, so that the server
// writes its own log, with nothing of ours in between: a server the
// parent-death signal stops still logs its shutdown there rather than die
// on a broken pipe. Anything else gets a pipe through a phraseWatch.
func output(out io.Writer) (io.Writer, func() bool) {
	if f, ok := out.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			if from, err := f.Seek(0, io.SeekCurrent); err == nil {
				return f, func() bool { return fileContains(f.Name(), from, bindFailPhrase) }
			}
		}
	}
	return WatchBind(out)
}

// WatchBind passes writes on to out and returns a function that says
// whether the server writing through it has said it could not bind an
// address: for a caller that starts a server on ports it picked and
// starts again on others when one was taken in between.
func WatchBind(out io.Writer) (io.Writer, func() bool) {
	w := &phraseWatch{w: out, phrase: bindFailPhrase}
	return w, w.seen
}

// fileContains reports whether phrase is in the file at path from offset
// on; a file it cannot read contains nothing.
func fileContains(path string, from int64, phrase []byte) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(f, 16<<20))
	return err == nil && bytes.Contains(b, phrase)
}

// phraseWatch passes writes on and remembers whether phrase went by (in
// one write: the server writes its log a line at a time).
type phraseWatch struct {
	w      io.Writer
	phrase []byte
	mu     sync.Mutex
	found  bool
}

func (p *phraseWatch) Write(b []byte) (int, error) {
	if bytes.Contains(b, p.phrase) {
		p.mu.Lock()
		p.found = true
		p.mu.Unlock()
	}
	return p.w.Write(b)
}

func (p *phraseWatch) seen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.found
}
