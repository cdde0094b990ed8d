package config

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A live config takes each edit of the file that loads and validates,
// says which machines joined, left or moved, keeps the sections that take
// a restart, and refuses an edit that does not load whole, naming the key
// and line, with the config in force unchanged. Each case edits the file
// the one before left.
func TestLiveReload(t *testing.T) {
	path := writeConfig(t, valid)
	start, err := Load(path)
	require.NoError(t, err)
	start.Worker.MetricsListen = "127.0.0.1:9999" // a flag, which no reload undoes
	var checked []string
	l, err := NewLive(path, start, func(c *Config) error {
		checked = append(checked, strings.Join(c.MachineNames(), ","))
		if _, ok := c.Machines["edge-bad"]; ok {
			return c.Invalid(Problem{Key: "machines.edge-bad", Message: "the worker's own check refuses it"})
		}
		return nil
	})
	require.NoError(t, err)
	require.Same(t, start, l.Current())

	edge2 := "  edge-2: {host: http://127.0.0.1:7402, tier: 1, modules: [host]}\n"
	cases := []struct {
		name     string
		file     string
		want     Change
		changed  bool
		refused  string // in the error; the config in force stays
		machines []string
	}{
		{name: "the same content saved again", file: valid, machines: []string{"control-node", "edge-1"}},
		{name: "a machine joins", file: valid + edge2, changed: true, want: Change{Joined: []string{"edge-2"}},
			machines: []string{"control-node", "edge-1", "edge-2"}},
		{name: "a half-saved edit", file: valid + edge2 + "  edge-3: {host: http://127.0.0.1:7403, tier: 1, modules: [hots]}\n",
			changed: true, refused: `machines.edge-3.modules: unknown module "hots"; modules are host, mesh-controller (line 8)`, machines: []string{"control-node", "edge-1", "edge-2"}},
		{name: "the worker's check refuses", file: valid + edge2 + "  edge-bad: {host: http://127.0.0.1:7404, tier: 1, modules: [host]}\n",
			changed: true, refused: "machines.edge-bad: the worker's own check refuses it (line 8)", machines: []string{"control-node", "edge-1", "edge-2"}},
		{name: "a machine moves, another leaves, the server's address changes",
			file:    "temporal: {address: 127.0.0.1:7299}\n" + strings.Replace(valid, "7401", "7411", 1),
			changed: true, want: Change{Left: []string{"edge-2"}, Moved: []string{"edge-1"}, Restart: []string{"temporal"}},
			machines: []string{"control-node", "edge-1"}},
		{name: "the server's address put back", file: strings.Replace(valid, "7401", "7411", 1), changed: true,
			machines: []string{"control-node", "edge-1"}},
	}
	at := time.Now()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := l.Current()
			require.NoError(t, os.WriteFile(path, []byte(c.file), 0o600))
			at = at.Add(time.Second)
			require.NoError(t, os.Chtimes(path, at, at))
			ch, changed, err := l.Reload()
			assert.Equal(t, c.changed, changed, "changed")
			if c.refused != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.refused)
				assert.Contains(t, err.Error(), path)
				assert.Same(t, before, l.Current(), "the config in force stays")
			} else {
				require.NoError(t, err)
				assert.Equal(t, c.want, ch)
			}
			cur := l.Current()
			assert.Equal(t, c.machines, cur.MachineNames())
			assert.Equal(t, "127.0.0.1:9999", cur.Worker.MetricsListen, "the process's own settings stay")
			assert.Equal(t, start.Temporal.Address, cur.Temporal.Address, "temporal takes a restart")
		})
	}
	// The refused edits were not retried on each look: the check saw each
	// content that validated once.
	assert.Equal(t, []string{"control-node,edge-1,edge-2", "control-node,edge-1,edge-2,edge-bad", "control-node,edge-1", "control-node,edge-1"}, checked)
}

// Watch tells a change and a refusal each once, and a file that stays
// broken is not told again on every look.
func TestLiveWatch(t *testing.T) {
	path := writeConfig(t, valid)
	start, err := Load(path)
	require.NoError(t, err)
	l, err := NewLive(path, start, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	changes, refusals := make(chan Change, 10), make(chan error, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Watch(ctx, time.Millisecond, func(c Change) { changes <- c }, func(err error) { refusals <- err })
	}()
	defer func() { cancel(); <-done }()

	replaceFile(t, path, "machines: [\n")
	err = <-refusals
	assert.Contains(t, err.Error(), path)
	replaceFile(t, path, valid+"  edge-2: {host: http://127.0.0.1:7402, tier: 1, modules: [host]}\n")
	assert.Equal(t, Change{Joined: []string{"edge-2"}}, <-changes)
	assert.Empty(t, refusals, "the broken file was told once")
}

// replaceFile puts src at path in one step, as an editor that saves by
// rename does, so that a watcher never reads it half-written.
func replaceFile(t *testing.T, path, src string) {
	t.Helper()
	tmp := path + ".new"
	require.NoError(t, os.WriteFile(tmp, []byte(src), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// Machines admitted through enrollment join the config in force beside the
// file's when they are listed, stay through an edit of the file, and leave
// when they are no longer listed; one that cannot be placed is named once;
// a list that fails keeps the config in force.
func TestLiveReadmit(t *testing.T) {
	path := writeConfig(t, valid+"enroll: {modules: [host]}\n")
	start, err := Load(path)
	require.NoError(t, err)
	l, err := NewLive(path, start, nil)
	require.NoError(t, err)
	var adm []Admitted
	var listErr error
	l.Admitting(func(context.Context) ([]Admitted, error) { return slices.Clone(adm), listErr })
	ctx := context.Background()
	edge9 := Admitted{Name: "edge-9", Host: "http://127.0.0.1:7409"}

	_, changed, err := l.Readmit(ctx)
	require.NoError(t, err)
	assert.False(t, changed, "nothing admitted yet")

	adm = []Admitted{edge9, {Name: "edge-1", Host: "http://127.0.0.1:7499"}}
	ch, changed, err := l.Readmit(ctx)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, []string{"edge-9"}, ch.Joined)
	assert.Contains(t, ch.NotAdmitted["edge-1"], "mesh.yaml names it too")
	assert.Equal(t, []string{"control-node", "edge-1", "edge-9"}, l.Current().MachineNames())

	_, changed, err = l.Readmit(ctx)
	require.NoError(t, err)
	assert.False(t, changed, "the same list again")

	edit := valid + "  edge-2: {host: http://127.0.0.1:7402, tier: 1, modules: [host]}\nenroll: {modules: [host]}\n"
	require.NoError(t, os.WriteFile(path, []byte(edit), 0o600))
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(path, later, later))
	ch, _, err = l.Reload()
	require.NoError(t, err)
	assert.Equal(t, []string{"edge-2"}, ch.Joined)
	assert.Empty(t, ch.NotAdmitted, "edge-1's reason was told already")
	assert.Equal(t, []string{"control-node", "edge-1", "edge-2", "edge-9"}, l.Current().MachineNames(), "edge-9 stays through the edit")

	listErr = errors.New("temporal down")
	_, _, err = l.Readmit(ctx)
	require.ErrorContains(t, err, "list the machines admitted through enrollment: temporal down")
	assert.Contains(t, l.Current().MachineNames(), "edge-9", "the config in force stays")

	listErr, adm = nil, nil
	ch, changed, err = l.Readmit(ctx)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, []string{"edge-9"}, ch.Left)
	assert.Equal(t, []string{"control-node", "edge-1", "edge-2"}, l.Current().MachineNames())
}
