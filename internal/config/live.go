package config

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Source is the mesh config in force. A *Config is a Source of itself, for
// a process that reads the file once (the starter, a test); a *Live is the
// worker's, which reads the file again when it changes, so that machines
// join and leave without a restart. A reader takes Current once per piece
// of work, so that one push or one page sees one config.
type Source interface {
	Current() *Config
}

// Current returns c: a config read once stays in force.
func (c *Config) Current() *Config { return c }

// DefaultReloadEvery is how often the worker looks at its mesh config for
// a change (Live.Watch): a stat, and a read only when the file's time or
// size moved.
const DefaultReloadEvery = 2 * time.Second

// Live is the worker's mesh config: the file it was started with, read
// again when it changes. A change that does not load or validate is
// refused whole, in words naming the key and line, and the config in force
// stays; so an edit saved half-way loses nothing. The sections that shape
// the process itself (temporal, state_dir, catalogue, registry, worker)
// take a restart: a reload keeps them as they were and says so. Every
// other section (machines, modules, tiers, push, analysis, windows,
// notify) applies to the next piece of work that reads it; a plan already
// running keeps the machines and policy it recorded when it started.
type Live struct {
	path  string
	check func(*Config) error
	// admitted lists the machines admitted through enrollment; nil: none.
	admitted func(context.Context) ([]Admitted, error)

	cur atomic.Pointer[Config]

	mu    sync.Mutex // one reload at a time
	first *Config    // the file as the process started with it, before its own settings
	seen  stamp
	file  *Config    // the file's config in force, before admitted machines
	adm   []Admitted // the admitted machines last listed, by name
	left  map[string]string
}

// stamp is what says a file changed: its time and size, looked at every
// time, and its content's digest, read when those moved.
type stamp struct {
	mod  time.Time
	size int64
	sum  [sha256.Size]byte
}

// NewLive holds cfg, loaded from path, as the config in force. check, if
// not nil, is what the worker asks of a config beyond Validate before it
// takes it (its modules' sources on disk); a reload it refuses is refused.
// The process's own settings (flags) may have been applied to cfg: a
// reload keeps them.
func NewLive(path string, cfg *Config, check func(*Config) error) (*Live, error) {
	l := &Live{path: path, check: check}
	st, data, err := l.read()
	if err != nil {
		return nil, err
	}
	file, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	l.first, l.seen, l.file = file, st, cfg
	l.cur.Store(cfg)
	return l, nil
}

// Admitting makes list the source of the machines admitted through
// enrollment (package enroll): Watch lists them at each look and puts
// those it can place in force beside the file's (Config.Admit). Call it
// before Watch.
func (l *Live) Admitting(list func(context.Context) ([]Admitted, error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.admitted = list
}

// Current is the config in force.
func (l *Live) Current() *Config { return l.cur.Load() }

// Change is what a reload changed, for the worker to act on and log.
type Change struct {
	// Joined and Left are the machines the file names now and did not, and
	// the other way round, sorted.
	Joined, Left []string
	// Moved are machines named before and now whose host, token or
	// ca_file changed: their clients are made again.
	Moved []string
	// Restart names the sections that differ from the file the worker
	// started with but take a restart; they are kept as they were.
	Restart []string
	// NotAdmitted says, by machine, why a machine admitted through
	// enrollment is not in force (Config.Admit): the ones whose reason is
	// new since the last change.
	NotAdmitted map[string]string
}

// Hosts says whether any machine's host must be reached differently.
func (c Change) Hosts() bool { return len(c.Joined)+len(c.Left)+len(c.Moved) > 0 }

// Reload reads the file again if it changed since it was last read, and
// puts it in force. changed is false when the file's content is what was
// read last time (whether that was taken or refused), so that a refused
// edit is reported once, not on every look. A refused edit's error names
// the file, and the config in force stays.
func (l *Live) Reload() (ch Change, changed bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, data, err := l.peek()
	if err != nil || data == nil {
		return Change{}, false, err
	}
	l.seen = st
	file, err := Parse(l.path, data)
	if err != nil {
		return Change{}, true, err
	}
	cur := l.Current()
	next := *file
	next.Temporal, next.StateDir, next.Catalogue, next.Registry, next.Worker =
		cur.Temporal, cur.StateDir, cur.Catalogue, cur.Registry, cur.Worker
	if err := next.Validate(); err != nil {
		return Change{}, true, err
	}
	if l.check != nil {
		if err := l.check(&next); err != nil {
			return Change{}, true, err
		}
	}
	ch = l.put(&next, l.adm)
	ch.Restart = restartSections(l.first, file)
	return ch, true, nil
}

// Readmit lists the machines admitted through enrollment and, when they
// changed since the last list, puts the file's config with them in force.
// changed is false when they did not; an error (Temporal unreachable)
// keeps the config in force.
func (l *Live) Readmit(ctx context.Context) (ch Change, changed bool, err error) {
	l.mu.Lock()
	list := l.admitted
	l.mu.Unlock()
	if list == nil {
		return Change{}, false, nil
	}
	adm, err := list(ctx)
	if err != nil {
		return Change{}, false, fmt.Errorf("list the machines admitted through enrollment: %w", err)
	}
	slices.SortFunc(adm, func(a, b Admitted) int { return cmp.Compare(a.Name, b.Name) })
	l.mu.Lock()
	defer l.mu.Unlock()
	if reflect.DeepEqual(adm, l.adm) {
		return Change{}, false, nil
	}
	return l.put(l.file, adm), true, nil
}

// put puts file, with the admitted machines adm it can place, in force,
// and says what changed.
func (l *Live) put(file *Config, adm []Admitted) Change {
	next, left := file.Admit(adm)
	ch := diff(l.Current(), next)
	for name, why := range left {
		if l.left[name] != why {
			if ch.NotAdmitted == nil {
				ch.NotAdmitted = map[string]string{}
			}
			ch.NotAdmitted[name] = why
		}
	}
	l.file, l.adm, l.left = file, adm, left
	l.cur.Store(next)
	return ch
}

// Watch reloads the file, and lists the admitted machines (Admitting),
// every interval (DefaultReloadEvery if zero) until ctx ends, calling
// changed with each change put in force and refused with each edit
// refused or list that failed, each error once.
func (l *Live) Watch(ctx context.Context, every time.Duration, changed func(Change), refused func(error)) {
	t := time.NewTicker(cmp.Or(every, DefaultReloadEvery))
	defer t.Stop()
	last := make([]string, 2) // each look's last error told, told once
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, look := range []func() (Change, bool, error){l.Reload, func() (Change, bool, error) { return l.Readmit(ctx) }} {
			ch, moved, err := look()
			switch {
			case err != nil && (moved || err.Error() != last[i]):
				last[i] = err.Error()
				refused(err)
			case err == nil:
				last[i] = ""
				if moved {
					changed(ch)
				}
			}
		}
	}
}

// read stats and reads the file.
func (l *Live) read() (stamp, []byte, error) {
	fi, err := os.Stat(l.path)
	if err != nil {
		return stamp{}, nil, fmt.Errorf("mesh config %s: %w", l.path, err)
	}
	data, err := os.ReadFile(l.path)
	if err != nil {
		return stamp{}, nil, fmt.Errorf("mesh config %s: %w", l.path, err)
	}
	return stamp{mod: fi.ModTime(), size: fi.Size(), sum: sha256.Sum256(data)}, data, nil
}

// peek reads the file only if its time or size moved, and returns its
// content only if that changed; nil data means no change.
func (l *Live) peek() (stamp, []byte, error) {
	fi, err := os.Stat(l.path)
	if err != nil {
		return stamp{}, nil, fmt.Errorf("mesh config %s: %w", l.path, err)
	}
	if fi.ModTime().Equal(l.seen.mod) && fi.Size() == l.seen.size {
		return stamp{}, nil, nil
	}
	st, data, err := l.read()
	if err != nil || st.sum == l.seen.sum {
		l.seen.mod, l.seen.size = st.mod, st.size
		return stamp{}, nil, err
	}
	return st, data, nil
}

// diff is which machines joined, left or moved from before to after.
func diff(before, after *Config) Change {
	var ch Change
	for _, name := range after.MachineNames() {
		b, ok := before.Machines[name]
		a := after.Machines[name]
		switch {
		case !ok:
			ch.Joined = append(ch.Joined, name)
		case !sameHost(b, a):
			ch.Moved = append(ch.Moved, name)
		}
	}
	for _, name := range before.MachineNames() {
		if _, ok := after.Machines[name]; !ok {
			ch.Left = append(ch.Left, name)
		}
	}
	return ch
}

// restartSections names the sections that take a restart and differ
// between two loads of the file.
func restartSections(before, after *Config) []string {
	sections := map[string]bool{
		"temporal":  !reflect.DeepEqual(before.Temporal, after.Temporal),
		"state_dir": before.StateDir != after.StateDir,
		"catalogue": before.Catalogue != after.Catalogue,
		"registry":  before.Registry != after.Registry,
		"worker":    !reflect.DeepEqual(before.Worker, after.Worker),
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(sections)) {
		if sections[name] {
			out = append(out, name)
		}
	}
	return out
}
