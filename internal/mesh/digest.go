package mesh

// shortDigestLen is "sha256:" and 12 hex digits.
const shortDigestLen = len("sha256:") + 12

// shortCommitLen is as much of a commit id as git's own abbreviations show
// in practice: enough to find it again.
const shortCommitLen = 12

// ShortDigest cuts a digest to its algorithm and first 12 hex digits, which
// tell builds apart where a whole digest would not fit (a table column, a
// workflow summary), so that every such place prints the same prefix and
// one can be searched for the other. Shorter strings are returned whole.
func ShortDigest(d string) string { return prefix(d, shortDigestLen) }

// ShortCommit cuts a commit id to its first 12 hex digits, for the same
// places and the same reason as ShortDigest.
func ShortCommit(c string) string { return prefix(c, shortCommitLen) }

func prefix(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
