package devserver

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// process is a running `temporal server start-dev`.
type process struct {
	cmd *exec.Cmd
	// done is closed once the process has exited; err is then its Wait
	// error.
	done chan struct{}
	err  error
}

// startProcess starts the CLI with args, both its outputs to out.
func startProcess(cli string, args []string, out io.Writer) (*process, error) {
	cmd := exec.Command(cli, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("running %s: %w", cli, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop interrupts the server as Ctrl-C would and waits for it to exit; it
// kills it after a minute. An exit already over, or caused by the
// interrupt, is no error.
func (p *process) stop() error {
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
		return ignoreInterruptExit(p.err)
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("server did not exit within a minute of SIGINT and was killed")
	}
}

// ignoreInterruptExit treats the exit caused by our own SIGINT as success.
func ignoreInterruptExit(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && !ee.Exited() { // killed by the signal we sent
		return nil
	}
	return err
}
