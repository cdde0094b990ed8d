package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// PathLogs streams a container's output: GET PathLogs?module=M&tail=N&follow=1
// answers the last N lines (DefaultLogTail when tail is left out, at most
// MaxLogTail) as plain text, stdout and stderr together as the container
// wrote them, and with follow keeps the answer open, writing what the
// container writes next, until the caller goes away or the container is
// stopped, replaced or removed. Like the report, it needs the bearer token.
const PathLogs = "/v1/logs"

// The logs' query parameters.
const (
	QueryModule = "module"
	QueryTail   = "tail"
	QueryFollow = "follow"
)

// Bounds of a logs request's tail: a caller that says nothing gets the last
// DefaultLogTail lines; more than MaxLogTail is refused, so that one request
// cannot make an agent read a log of any length into an answer.
const (
	DefaultLogTail = 100
	MaxLogTail     = 10000
)

// LogsRequest asks for a container's output (see PathLogs).
type LogsRequest struct {
	// Module names the container.
	Module string
	// Tail is how many of the last lines to send first: 0 to MaxLogTail.
	Tail int
	// Follow keeps the stream open for what the container writes next.
	Follow bool
}

// LogStreamer is a host that can stream its containers' output: the agent
// in process, and HTTPClient over the wire. It is apart from Client so that
// a host without it (the test host, a fleet's own agent, the noop runtime)
// is still a Client; the handler answers 501 unsupported for one.
type LogStreamer interface {
	// Logs writes the last req.Tail lines of req.Module's output to out
	// and, with req.Follow, what it writes next, until ctx ends or the
	// container is stopped, replaced or removed. Before it writes
	// anything it returns a *Refusal for what it cannot serve: CodeNotFound
	// for a module it does not run, CodeUnsupported for a runtime that
	// keeps no logs. Once it knows it will stream, it flushes out when out
	// is an http.Flusher, so that a follower hears the stream is open
	// before the container writes anything.
	Logs(ctx context.Context, req LogsRequest, out io.Writer) error
}

// Flush flushes w when it is an http.Flusher (see LogStreamer).
func Flush(w io.Writer) {
	if f, ok := w.(interface{ Flush() }); ok {
		f.Flush()
	}
}

var _ LogStreamer = (*HTTPClient)(nil)

// errNoAnswer ends a logs request whose host sent no answer in time.
var errNoAnswer = errors.New("no answer")

// errStalled ends a logs request without follow whose host stopped sending
// mid-answer.
var errStalled = errors.New("the host stopped sending")

// Logs streams req.Module's output into out (see LogStreamer and PathLogs).
// The client's timeout bounds the wait for the answer to begin, not the
// stream: a follow runs until ctx ends (then Logs returns ctx's error,
// wrapped) or the host ends it (the container was stopped, replaced or
// removed: nil). Without follow the answer is a bounded tail, so the
// timeout also bounds each wait for more of it: a host that stops sending
// mid-answer is cut off rather than waited on forever. A refusal is a
// *RefusedError (CodeNotFound, CodeUnsupported, CodeUnauthorized...), a
// host that cannot be reached, cuts the stream short or stalls an
// *UnreachableError.
func (c *HTTPClient) Logs(ctx context.Context, req LogsRequest, out io.Writer) error {
	op := "logs of " + req.Module
	q := url.Values{QueryModule: {req.Module}, QueryTail: {strconv.Itoa(req.Tail)}}
	if req.Follow {
		q.Set(QueryFollow, "1")
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hc := *c.hc
	stop := func() bool { return true }
	wait := hc.Timeout
	if wait > 0 {
		hc.Timeout = 0
		t := time.AfterFunc(wait, func() { cancel(fmt.Errorf("%w within %s", errNoAnswer, wait)) })
		stop = t.Stop
	}
	resp, err := c.send(rctx, &hc, http.MethodGet, PathLogs+"?"+q.Encode(), nil, op)
	// Once the answer has begun, only the caller ends the stream; a timer
	// that fired first has cut it already.
	if !stop() || errors.Is(context.Cause(rctx), errNoAnswer) {
		if err == nil {
			drain(resp)
		}
		return &UnreachableError{URL: c.base, Err: fmt.Errorf("%s: %w", op, context.Cause(rctx))}
	}
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		defer drain(resp)
		return c.failed(resp, op)
	}
	// Closed, not drained: a follow's body never ends by itself.
	defer resp.Body.Close()
	if req.Follow || wait <= 0 {
		return c.copyStream(ctx, out, resp.Body, op)
	}
	idle := time.AfterFunc(wait, func() { cancel(fmt.Errorf("%w for %s", errStalled, wait)) })
	defer idle.Stop()
	err = c.copyStream(ctx, out, &idleReader{r: resp.Body, idle: idle, wait: wait}, op)
	if err != nil && errors.Is(context.Cause(rctx), errStalled) {
		return &UnreachableError{URL: c.base, Err: fmt.Errorf("%s: %w", op, context.Cause(rctx))}
	}
	return err
}

// idleReader restarts its idle timer whenever a read brings bytes, so that
// the timer fires only once the stream has sent nothing for wait.
type idleReader struct {
	r    io.Reader
	idle *time.Timer
	wait time.Duration
}

func (i *idleReader) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	if n > 0 {
		i.idle.Reset(i.wait)
	}
	return n, err
}

// copyStream copies a stream's body to out, telling the caller's end (ctx),
// out failing, and the host cutting the stream apart.
func (c *HTTPClient) copyStream(ctx context.Context, out io.Writer, body io.Reader, op string) error {
	ew := &errWriter{w: out}
	_, err := io.Copy(ew, body)
	switch {
	case ew.err != nil:
		return fmt.Errorf("host %s: %s: write: %w", c.base, op, ew.err)
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("host %s: %s: %w", c.base, op, ctx.Err())
	case err != nil:
		return &UnreachableError{URL: c.base, Err: fmt.Errorf("%s: stream cut short: %w", op, err)}
	}
	return nil
}

// errWriter remembers its writer's error, so that a failing out is told
// apart from a failing stream.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}
