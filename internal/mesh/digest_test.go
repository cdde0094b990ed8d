package mesh

import "testing"

func TestShortForms(t *testing.T) {
	digest := "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	commit := "1f392fddfa7f96c20f269b7a4352b3d0ac0d2440"
	for _, tc := range []struct {
		name, got, want string
	}{
		{"digest", ShortDigest(digest), "sha256:0123456789ab"},
		{"short digest kept whole", ShortDigest("sha256:01"), "sha256:01"},
		{"empty digest", ShortDigest(""), ""},
		{"commit", ShortCommit(commit), "1f392fddfa7f"},
		{"short commit kept whole", ShortCommit("1f39"), "1f39"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}
