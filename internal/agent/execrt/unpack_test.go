//go:build unix

package execrt

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type tentry struct {
	name, link string
	typ        byte
	mode       int64
	body       string
}

func tarOf(t *testing.T, es ...tentry) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		typ, mode := e.typ, e.mode
		if typ == 0 {
			typ = tar.TypeReg
		}
		if mode == 0 {
			mode = 0o644
		}
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: e.name, Linkname: e.link, Typeflag: typ, Mode: mode, Size: int64(len(e.body))}))
		_, err := tw.Write([]byte(e.body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	return &b
}

// sandbox is a rootfs inside a directory with a file outside the rootfs
// that no layer may touch.
func sandbox(t *testing.T) (rootfs, outside string, u *unpacker) {
	t.Helper()
	base := t.TempDir()
	rootfs = filepath.Join(base, "rootfs")
	outside = filepath.Join(base, "outside")
	require.NoError(t, os.MkdirAll(rootfs, 0o755))
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600))
	root, err := os.OpenRoot(rootfs)
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	return rootfs, outside, newUnpacker(root)
}

func TestUnpackRefusesEscapes(t *testing.T) {
	cases := []struct {
		name    string
		entries func(outside string) []tentry
	}{
		{"dot-dot", func(string) []tentry { return []tentry{{name: "../outside/pwned", body: "x"}} }},
		{"inner dot-dot", func(string) []tentry { return []tentry{{name: "a/../../outside/pwned", body: "x"}} }},
		{"through absolute symlink", func(o string) []tentry {
			return []tentry{{name: "lnk", typ: tar.TypeSymlink, link: o}, {name: "lnk/pwned", body: "x"}}
		}},
		{"through relative symlink", func(string) []tentry {
			return []tentry{{name: "up", typ: tar.TypeSymlink, link: "../outside"}, {name: "up/pwned", body: "x"}}
		}},
		{"directory through symlink", func(string) []tentry {
			return []tentry{{name: "up", typ: tar.TypeSymlink, link: "../outside"}, {name: "up/d/", typ: tar.TypeDir, mode: 0o755}}
		}},
		{"symlink through symlink", func(string) []tentry {
			return []tentry{{name: "up", typ: tar.TypeSymlink, link: ".."}, {name: "up/outside/pwned", typ: tar.TypeSymlink, link: "x"}}
		}},
		{"hard link out", func(string) []tentry { return []tentry{{name: "hl", typ: tar.TypeLink, link: "../outside/secret"}} }},
		{"hard link through symlink", func(o string) []tentry {
			return []tentry{{name: "lnk", typ: tar.TypeSymlink, link: o}, {name: "hl", typ: tar.TypeLink, link: "lnk/secret"}}
		}},
		{"whiteout of parent", func(string) []tentry { return []tentry{{name: "a/.wh...", body: ""}} }},
		{"whiteout through symlink", func(string) []tentry {
			return []tentry{{name: "up", typ: tar.TypeSymlink, link: "../outside"}, {name: "up/.wh.secret"}}
		}},
		{"opaque through symlink", func(string) []tentry {
			return []tentry{{name: "up", typ: tar.TypeSymlink, link: "../outside"}, {name: "up/.wh..wh..opq"}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, outside, u := sandbox(t)
			err := u.layer(tarOf(t, tc.entries(outside)...))
			require.ErrorIs(t, err, ErrUnsafeImage)
			assert.NoFileExists(t, filepath.Join(outside, "pwned"))
			assert.NoDirExists(t, filepath.Join(outside, "d"))
			b, err := os.ReadFile(filepath.Join(outside, "secret"))
			require.NoError(t, err)
			assert.Equal(t, "secret", string(b))
		})
	}
}

func TestUnpackReplacesSymlinkInsteadOfWritingThrough(t *testing.T) {
	rootfs, outside, u := sandbox(t)
	secret := filepath.Join(outside, "secret")
	require.NoError(t, u.layer(tarOf(t, tentry{name: "evil", typ: tar.TypeSymlink, link: secret})))
	require.NoError(t, u.layer(tarOf(t, tentry{name: "evil", body: "mine"})))
	b, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "secret", string(b))
	fi, err := os.Lstat(filepath.Join(rootfs, "evil"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular())
}

func TestUnpackLayers(t *testing.T) {
	rootfs, _, u := sandbox(t)
	require.NoError(t, u.layer(tarOf(t,
		tentry{name: "/etc/", typ: tar.TypeDir, mode: 0o755},
		tentry{name: "/etc/passwd", body: "root", mode: 0o644},
		tentry{name: "./bin/tool", body: "#!", mode: 0o4755},
		tentry{name: "ro/", typ: tar.TypeDir, mode: 0o555},
		tentry{name: "ro/file", body: "r", mode: 0o400},
		tentry{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
		tentry{name: "a/x", body: "x"},
		tentry{name: "a/y", body: "y"},
		tentry{name: "b/z", body: "z"},
		tentry{name: "b/keep/old", body: "old"},
		tentry{name: "lib", typ: tar.TypeSymlink, link: "usr/lib"},
		tentry{name: "usr/lib/libc", body: "c"},
		tentry{name: "sh", typ: tar.TypeSymlink, link: "/bin/tool"},
		tentry{name: "hard", typ: tar.TypeLink, link: "a/y"},
		tentry{name: "dev/null", typ: tar.TypeChar},
	)))
	require.NoError(t, u.layer(tarOf(t,
		tentry{name: "a/.wh.x"},
		tentry{name: "b/new", body: "n"},
		tentry{name: "b/.wh..wh..opq"},
		tentry{name: "lib/libm", body: "m"},
		tentry{name: "nothing/.wh.here"},
	)))
	require.NoError(t, u.finish())

	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(rootfs, p))
		require.NoError(t, err, p)
		return string(b)
	}
	perm := func(p string) os.FileMode {
		fi, err := os.Lstat(filepath.Join(rootfs, p))
		require.NoError(t, err, p)
		return fi.Mode() & (os.ModePerm | os.ModeSticky | os.ModeSetuid | os.ModeSetgid)
	}
	assert.Equal(t, "root", read("etc/passwd"), "absolute names are inside the root")
	assert.Equal(t, os.FileMode(0o755), perm("bin/tool"), "setuid dropped")
	assert.Equal(t, os.FileMode(0o555), perm("ro"), "directory mode applied after the layers")
	assert.Equal(t, os.FileMode(0o400), perm("ro/file"))
	assert.Equal(t, os.FileMode(0o777)|os.ModeSticky, perm("tmp"))
	assert.NoFileExists(t, filepath.Join(rootfs, "a/x"), "whited out")
	assert.Equal(t, "y", read("a/y"))
	assert.Equal(t, "y", read("hard"))
	assert.NoFileExists(t, filepath.Join(rootfs, "b/z"), "opaque directory")
	assert.NoDirExists(t, filepath.Join(rootfs, "b/keep"))
	assert.Equal(t, "n", read("b/new"), "the opaque layer's own entries stay")
	assert.Equal(t, "m", read("usr/lib/libm"), "relative symlinks inside the root are followed")
	link, err := os.Readlink(filepath.Join(rootfs, "sh"))
	require.NoError(t, err)
	assert.Equal(t, "/bin/tool", link, "absolute symlinks are kept as data")
	assert.NoFileExists(t, filepath.Join(rootfs, "dev/null"), "devices are skipped")

	require.NoError(t, removeTree(rootfs), "read-only directories do not stop removal")
	assert.NoDirExists(t, rootfs)
}

func TestEntryName(t *testing.T) {
	for in, want := range map[string]string{"/": ".", "./": ".", "a/b/": "a/b", "/a//b": "a/b", "./a/./b": "a/b", "..a": "..a"} {
		got, err := entryName(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"..", "../a", "a/..", "a/../b", "/../a"} {
		_, err := entryName(in)
		assert.ErrorIs(t, err, ErrUnsafeImage, in)
	}
}
