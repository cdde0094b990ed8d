// Package devlaunch starts the Temporal CLI's dev server (`temporal server
// start-dev`) as a child process and waits until it answers, for the tests'
// servers (package devserver) and the bench's.
//
// It exists because the SDK's testsuite.StartDevServer keeps dialling for a
// minute after the server has exited, and a server whose port was picked
// free but taken before it bound it exits at once: on a box running tests
// in parallel, where every server's internal ports are picked the same way,
// that happens. Launch notices the exit, and when it picked the port itself
// it picks another and starts again.
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
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
)

// Attempts bounds the starts on fresh ports when the one picked was taken
// before the server bound it.
const Attempts = 4

// ErrAddressInUse marks a start that failed because the server could not
// bind one of its addresses.
var ErrAddressInUse = errors.New("address already in use")

// Options says how to start a dev server.
type Options struct {
	// CLI is the temporal binary.
	CLI string
	// HostPort is the frontend's address. Empty picks a free loopback port,
	// and another when that one was taken before the server bound it.
	HostPort string
	// Args follow `temporal server start-dev --ip <host> --port <port>`.
	Args []string
	// Client is how to dial the server; Launch sets its HostPort.
	Client client.Options
	// Out takes the server's output and a line per attempt.
	Out io.Writer
	// Timeout bounds one attempt. Default 2 minutes.
	Timeout time.Duration
}

// Process is a dev server Launch started.
type Process struct {
	cmd      *exec.Cmd
	hostPort string
	// done is closed once the process has exited; err is then its Wait
	// error.
	done chan struct{}
	err  error
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

// Launch starts the server and returns it with a client dialled to it.
func Launch(o Options) (*Process, client.Client, error) {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
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
		p, c, err := launch(o)
		if err == nil || fixed || attempt == Attempts || !errors.Is(err, ErrAddressInUse) {
			return p, c, err
		}
		Mark(o.Out, fmt.Sprintf("an address was taken before the server bound it (attempt %d of %d); starting again on another port", attempt, Attempts))
	}
}

func launch(o Options) (*Process, client.Client, error) {
	host, port, err := net.SplitHostPort(o.HostPort)
	if err != nil {
		return nil, nil, fmt.Errorf("address %q: %w", o.HostPort, err)
	}
	args := append([]string{"server", "start-dev", "--ip", host, "--port", port}, o.Args...)
	Mark(o.Out, fmt.Sprintf("starting %s server start-dev on %s", o.CLI, o.HostPort))
	watch := &phraseWatch{w: o.Out, phrase: []byte("address already in use")}
	cmd := exec.Command(o.CLI, args...)
	cmd.Stdout, cmd.Stderr = watch, watch
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("running %s: %w", o.CLI, err)
	}
	p := &Process{cmd: cmd, hostPort: o.HostPort, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	co := o.Client
	co.HostPort = o.HostPort
	c, err := p.waitReady(ctx, co, o.Timeout)
	if err != nil {
		_ = p.Stop()
		if watch.seen() {
			err = fmt.Errorf("%w: %w", ErrAddressInUse, err)
		}
		return nil, nil, err
	}
	Mark(o.Out, "server ready")
	return p, c, nil
}

// waitReady dials the frontend until it answers, the process exits, or ctx
// ends.
func (p *Process) waitReady(ctx context.Context, co client.Options, timeout time.Duration) (client.Client, error) {
	var last error
	for {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := client.DialContext(dctx, co)
		cancel()
		if err == nil {
			return c, nil
		}
		last = err
		select {
		case <-p.done:
			return nil, fmt.Errorf("the server exited before answering (%v); last dial: %w", p.err, last)
		case <-ctx.Done():
			return nil, fmt.Errorf("no answer within %s: %w", timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// HostPort is the frontend's address.
func (p *Process) HostPort() string { return p.hostPort }

// Stop interrupts the server as Ctrl-C would and waits for it to exit; it
// kills it after a minute. An exit already over, or caused by the
// interrupt, is no error.
func (p *Process) Stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		_ = p.cmd.Process.Kill()
	}
	select {
	case <-p.done:
		var ee *exec.ExitError
		if errors.As(p.err, &ee) && !ee.Exited() { // killed by the signal we sent
			return nil
		}
		return p.err
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("server did not exit within a minute of SIGINT and was killed")
	}
}

// Mark writes a line of ours into the server's output, timed.
func Mark(w io.Writer, msg string) {
	_, _ = fmt.Fprintf(w, "--- devserver %s: %s\n", time.Now().Format("15:04:05.000"), msg)
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
