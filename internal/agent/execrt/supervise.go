package execrt

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// retire stops prev (and, through its own supervisor, whatever it replaced)
// and waits until its process is gone.
func retire(prev *container) {
	if prev == nil {
		return
	}
	prev.cancel()
	<-prev.done
}

// supervise pulls ct's image, retires its predecessor and runs its process
// until ct is stopped.
func (r *Runtime) supervise(ct *container) {
	defer func() {
		retire(ct.prev)
		close(ct.done)
		r.mu.Lock()
		delete(r.live, ct)
		r.mu.Unlock()
		r.wg.Done()
	}()
	bo := r.newBackoff()
	var img *image
	for {
		var err error
		img, err = r.image(ct.ctx, ct.spec)
		if ct.ctx.Err() != nil {
			return
		}
		if err == nil {
			break
		}
		// The declaration replaced the predecessor; it must not keep
		// running unreported because its successor cannot.
		retire(ct.prev)
		ct.prev = nil
		if permanent(err) {
			r.report(ct, mesh.StateExited, err.Error()+"; not running it", false)
			return
		}
		d := bo.next()
		r.report(ct, mesh.StateStarting, fmt.Sprintf("%v; retrying in %s", err, d), false)
		if r.sleep(ct.ctx, d) != nil {
			return
		}
	}
	if r.superseded(ct) {
		// A newer instance replaced this one before it ran: keep the
		// predecessor serving until that one is ready and stops us.
		<-ct.ctx.Done()
		return
	}
	retire(ct.prev)
	ct.prev = nil
	r.mu.Lock()
	ct.img = img
	r.mu.Unlock()
	r.run(ct, img, bo)
}

// run starts ct's process and restarts it whenever it exits, until ct is
// stopped.
func (r *Runtime) run(ct *container, img *image, bo *backoff) {
	logPath := r.logPath(ct.spec.Module)
	short := 0
	for {
		if ct.ctx.Err() != nil {
			return
		}
		var why string
		var ran time.Duration
		p, err := r.start(ct, img, logPath)
		switch {
		case permanent(err):
			r.report(ct, mesh.StateExited, fmt.Sprintf("%v; not running it; log %s", err, logPath), false)
			return
		case err != nil:
			why = fmt.Sprintf("could not start: %v", err)
		default:
			r.setPID(ct, p.pid)
			healthy := time.NewTimer(r.o.HealthyAfter)
			select {
			case <-p.exited:
			case <-healthy.C:
				r.report(ct, mesh.StateRunning, "", false)
				select {
				case <-p.exited:
				case <-ct.ctx.Done():
					r.stop(p, r.stopGrace(ct))
					return
				}
			case <-ct.ctx.Done():
				healthy.Stop()
				r.stop(p, r.stopGrace(ct))
				return
			}
			healthy.Stop()
			ran = time.Since(p.started)
			why = fmt.Sprintf("%s after %s", p.exitReason(), ran.Round(time.Millisecond))
			p.finish(why)
			r.setPID(ct, 0)
		}
		if ran >= r.o.ResetAfter {
			bo.reset()
			short = 0
		}
		short++
		d := bo.next()
		if short >= r.o.CrashLoopAfter {
			r.report(ct, mesh.StateCrashLooping, fmt.Sprintf("%s; %d short runs in a row; restarting in %s; log %s", why, short, d, logPath), true)
		} else {
			r.report(ct, mesh.StateExited, fmt.Sprintf("%s; restarting in %s; log %s", why, d, logPath), true)
		}
		if r.sleep(ct.ctx, d) != nil {
			return
		}
		if short < r.o.CrashLoopAfter {
			r.report(ct, mesh.StateStarting, "", false)
		}
	}
}

// logPath is module's log file: every process of the module, every
// instance and restart, appends its output there (see Logs).
func (r *Runtime) logPath(module string) string {
	return filepath.Join(r.logs, module+".log")
}

// backoff is the delay before a restart: initial, doubling up to max.
type backoff struct {
	initial, max, cur time.Duration
}

func (r *Runtime) newBackoff() *backoff {
	return &backoff{initial: r.o.BackoffInitial, max: r.o.BackoffMax, cur: r.o.BackoffInitial}
}

func (b *backoff) next() time.Duration {
	d := b.cur
	b.cur = min(b.cur*2, b.max)
	return d
}

func (b *backoff) reset() { b.cur = b.initial }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
