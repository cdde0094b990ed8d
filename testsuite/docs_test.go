package testsuite

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mdLink is a Markdown link or image's target: [text](target) or
// [text](target "title").
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// Every link of the repository's Markdown to a file resolves to a file in
// the repository: none points outside it (a clone has nothing there), and
// none names a file that moved.
func TestDocsLinksResolveInsideTheRepository(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	var docs []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			docs = append(docs, p)
		}
		return nil
	}))
	require.Contains(t, docs, filepath.Join(root, "README.md"))
	require.Contains(t, docs, filepath.Join(root, "docs", "design.md"))

	links := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, doc)
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			p := filepath.Join(filepath.Dir(doc), filepath.FromSlash(target))
			links++
			inside, err := filepath.Rel(root, p)
			if !assert.NoError(t, err) || !assert.True(t, filepath.IsLocal(inside), "%s links to %s, outside the repository", rel, m[1]) {
				continue
			}
			_, err = os.Stat(p)
			assert.NoError(t, err, "%s links to %s", rel, m[1])
		}
	}
	require.Greater(t, links, 5, "the pattern found the docs' links")
}
