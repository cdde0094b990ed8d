package execrt

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Whiteouts, as the OCI image spec names them: a file .wh.NAME in a layer
// deletes NAME from the layers below, and .wh..wh..opq in a directory
// deletes everything the layers below put there.
const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// unpacker applies layers, in order, to one image's root filesystem.
//
// Extraction is a security boundary: a layer is arbitrary bytes from a
// registry, and a tar entry named "../../etc/cron.d/x", or a symlink
// "lib -> /" followed by an entry "lib/etc/passwd", must not write outside
// the root. Two things keep it inside:
//
//   - entry names are checked lexically first: a leading "/" is dropped
//     (absolute names mean the image's root), and any ".." component refuses
//     the image (ErrUnsafeImage), as does a hard link to such a name or a
//     whiteout of "." or "..";
//   - every file operation goes through an os.Root opened on the rootfs,
//     which resolves each path component itself and refuses one that leaves
//     the root, whether by ".." or through a symlink: relative links are
//     followed only while they stay inside, absolute links never. Such an
//     entry refuses the image too (ErrUnsafeImage).
//
// An existing entry is removed before a new one is created in its place,
// and files are created with O_EXCL, so that writing a file never follows a
// symlink a lower layer (or an earlier entry) left at its name. Symlinks are
// created as the image says, absolute targets included: they are data, and
// the unpacker never follows one out of the root. Hard links may only name
// entries inside the root.
//
// Modes are kept (permission bits and the sticky bit); setuid and setgid
// bits are dropped, since the process runs as the agent's user without a
// chroot and such bits could only hand someone else the agent's rights.
// Ownership and timestamps are not kept. Device nodes and FIFOs are
// skipped: an unprivileged agent cannot make them and a process has no use
// for them outside a container. Directory modes are applied after the last
// layer, so that a read-only directory does not stop later entries.
type unpacker struct {
	root     *os.Root
	dirModes map[string]fs.FileMode
	// dirs are the directories entries were made in, synced before the
	// image is marked complete.
	dirs map[string]bool
}

func newUnpacker(root *os.Root) *unpacker {
	return &unpacker{root: root, dirModes: map[string]fs.FileMode{}, dirs: map[string]bool{".": true}}
}

// layer applies one uncompressed layer.
func (u *unpacker) layer(r io.Reader) error {
	tr := tar.NewReader(r)
	// written holds this layer's entries and their parents: an opaque
	// whiteout keeps them.
	written := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if errors.Is(err, tar.ErrInsecurePath) && hdr != nil {
			// archive/tar's own check (GODEBUG tarinsecurepath=0) also
			// flags absolute names, which mean the image root; entryName
			// below judges the name.
			err = nil
		}
		if err != nil {
			return fmt.Errorf("read layer: %w", err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		if strings.HasPrefix(path.Base(name), whiteoutPrefix) {
			if err := u.whiteout(name, written); err != nil {
				return fmt.Errorf("whiteout %q: %w", hdr.Name, unsafeIfEscape(err))
			}
			continue
		}
		if err := u.entry(hdr, name, tr); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, unsafeIfEscape(err))
		}
		for p := name; p != "."; p = path.Dir(p) {
			written[p] = true
		}
	}
}

// entryName is a tar entry's name relative to the root, or an error if it
// would leave it.
func entryName(n string) (string, error) {
	n = strings.TrimLeft(n, "/")
	for _, part := range strings.Split(n, "/") {
		if part == ".." {
			return "", fmt.Errorf("entry %q leaves the image root: %w", n, ErrUnsafeImage)
		}
	}
	if n == "" {
		return ".", nil
	}
	c := path.Clean(n)
	if c != "." && !filepath.IsLocal(filepath.FromSlash(c)) {
		return "", fmt.Errorf("entry %q leaves the image root: %w", n, ErrUnsafeImage)
	}
	return c, nil
}

func (u *unpacker) entry(hdr *tar.Header, name string, r io.Reader) error {
	switch hdr.Typeflag {
	case tar.TypeDir:
		if fi, err := u.root.Lstat(name); err == nil && fi.IsDir() {
			u.dirModes[name] = mode(hdr.Mode)
			return nil
		}
		if err := u.prepare(name); err != nil {
			return err
		}
		if err := u.root.Mkdir(name, 0o700); err != nil {
			return err
		}
		u.dirModes[name] = mode(hdr.Mode)
		u.dirs[name] = true
	case tar.TypeReg:
		if err := u.prepare(name); err != nil {
			return err
		}
		f, err := u.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := u.root.Chmod(name, mode(hdr.Mode)); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := u.prepare(name); err != nil {
			return err
		}
		if err := u.root.Symlink(hdr.Linkname, name); err != nil {
			return err
		}
	case tar.TypeLink:
		target, err := entryName(hdr.Linkname)
		if err != nil {
			return err
		}
		if target == "." {
			return fmt.Errorf("hard link to the image root: %w", ErrUnsafeImage)
		}
		if err := u.prepare(name); err != nil {
			return err
		}
		if err := u.root.Link(target, name); err != nil {
			return err
		}
	default:
		// Devices, FIFOs, and headers of other kinds: nothing to make.
		return nil
	}
	u.dirs[path.Dir(name)] = true
	return nil
}

// prepare makes name's parent directories and removes whatever is at name,
// so that the entry is created afresh rather than through an old symlink.
func (u *unpacker) prepare(name string) error {
	if dir := path.Dir(name); dir != "." {
		if err := u.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if _, err := u.root.Lstat(name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return u.root.RemoveAll(name)
}

// whiteout deletes what a whiteout entry names from the layers below.
func (u *unpacker) whiteout(name string, written map[string]bool) error {
	dir, base := path.Dir(name), path.Base(name)
	if base == whiteoutOpaque {
		d, err := u.root.Open(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		ents, err := d.ReadDir(-1)
		_ = d.Close()
		if err != nil {
			return err
		}
		for _, e := range ents {
			child := path.Join(dir, e.Name())
			if written[child] {
				continue
			}
			if err := u.root.RemoveAll(child); err != nil {
				return err
			}
		}
		return nil
	}
	target := strings.TrimPrefix(base, whiteoutPrefix)
	if target == "" || target == "." || target == ".." {
		return fmt.Errorf("whiteout of %q: %w", target, ErrUnsafeImage)
	}
	err := u.root.RemoveAll(path.Join(dir, target))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// finish applies the directories' modes, deepest first, and syncs the
// directories entries were made in.
func (u *unpacker) finish() error {
	names := make([]string, 0, len(u.dirModes))
	for n := range u.dirModes {
		names = append(names, n)
	}
	depth := func(s string) int { return strings.Count(s, "/") }
	slices.SortFunc(names, func(a, b string) int { return depth(b) - depth(a) })
	for _, n := range u.existingDirs() {
		if err := u.syncDir(n); err != nil {
			return err
		}
	}
	for _, n := range names {
		fi, err := u.root.Lstat(n)
		if err != nil || !fi.IsDir() {
			// Whited out or replaced by a later layer.
			continue
		}
		if err := u.root.Chmod(n, u.dirModes[n]); err != nil {
			return unsafeIfEscape(err)
		}
	}
	return nil
}

// existingDirs lists the directories to sync that are still directories.
func (u *unpacker) existingDirs() []string {
	var out []string
	for n := range u.dirs {
		if fi, err := u.root.Lstat(n); err == nil && fi.IsDir() {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func (u *unpacker) syncDir(name string) error {
	d, err := u.root.Open(name)
	if err != nil {
		return unsafeIfEscape(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return err
	}
	return nil
}

// mode is a tar mode as kept: permissions and the sticky bit, without
// setuid and setgid.
func mode(m int64) fs.FileMode {
	fm := fs.FileMode(m) & fs.ModePerm
	if m&0o1000 != 0 {
		fm |= fs.ModeSticky
	}
	return fm
}

// unsafeIfEscape marks os.Root's refusal of a path leaving the root (by a
// symlink, since names with ".." never get this far) as ErrUnsafeImage, so
// that the image is refused for good rather than retried.
func unsafeIfEscape(err error) error {
	// os.Root's sentinel is unexported; it sits innermost in the chain of
	// *fs.PathError it returns.
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, isPath := e.(*fs.PathError); !isPath && e.Error() == "path escapes from parent" {
			return fmt.Errorf("%w: %w", ErrUnsafeImage, err)
		}
	}
	return err
}

// removeTree removes a directory tree that may hold read-only directories,
// which os.RemoveAll alone cannot empty. It never follows a symlink.
func removeTree(p string) error {
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}
