package mesh

// shortDigestLen is "sha256:" and 12 hex digits.
const shortDigestLen = len("sha256:") + 12

// ShortDigest cuts a digest to its algorithm and first 12 hex digits, which
// tell builds apart where a whole digest would not fit (a table column, a
// workflow summary), so that every such place prints the same prefix and
// one can be searched for the other. Shorter strings are returned whole.
func ShortDigest(d string) string {
	if len(d) > shortDigestLen {
		return d[:shortDigestLen]
	}
	return d
}
