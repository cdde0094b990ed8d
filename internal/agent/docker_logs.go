package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/meshroll/meshroll/internal/host"
)

// Logs streams module's container output through the engine's logs API
// (stdout and stderr, as docker logs shows them; see LogReader). With
// follow the engine ends the stream when the container stops, which is
// also how a replaced or removed container ends it.
func (r *DockerRuntime) Logs(ctx context.Context, module string, tail int, follow bool, out io.Writer) error {
	id := r.idOf(module)
	if id == "" {
		return &host.Refusal{Code: host.CodeNotFound, Message: fmt.Sprintf(
			"module %s has no container yet (its image is being pulled or it could not be created; the report says why)", module)}
	}
	q := url.Values{"stdout": {"1"}, "stderr": {"1"}, "tail": {strconv.Itoa(tail)}}
	if follow {
		q.Set("follow", "1")
	}
	resp, err := r.request(ctx, http.MethodGet, "/containers/"+id+"/logs?"+q.Encode(), nil)
	if err != nil {
		return fmt.Errorf("runtime docker: logs of %s: %w", module, err)
	}
	defer resp.Body.Close()
	host.Flush(out)
	if err := demux(out, resp.Body); err != nil && ctx.Err() == nil {
		return fmt.Errorf("runtime docker: logs of %s: %w", module, err)
	}
	return nil
}

// streamStderr is the highest stream type of the engine's multiplexed
// output (0 stdin, 1 stdout, 2 stderr).
const streamStderr = 2

// errNotMultiplexed is output that does not start with a frame header: a
// container with a terminal, whose output the engine sends raw. meshroll
// creates none.
var errNotMultiplexed = errors.New("not the engine's multiplexed output (a container with a terminal?)")

// demux copies the engine's multiplexed output of a container without a
// terminal (its logs, an exec's output) to out, stdout and stderr as they
// came: frames of an 8-byte header (the stream: 0 stdin, 1 stdout, 2
// stderr; three zero bytes; the payload's length, big-endian uint32) and
// then that many bytes. A stream ending inside a frame is
// io.ErrUnexpectedEOF, so that output cut short is not mistaken for all
// there was.
func demux(out io.Writer, r io.Reader) error {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("frame header: %w", err)
		}
		if hdr[0] > streamStderr || hdr[1] != 0 || hdr[2] != 0 || hdr[3] != 0 {
			return errNotMultiplexed
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		if got, err := io.CopyN(out, r, n); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("frame of %d bytes, %d read: %w", n, got, err)
		}
	}
}
