package config

import (
	"errors"
	"testing"
)

// FuzzParse feeds the config loader arbitrary bytes. Whatever the input, it
// either returns a config that validates or an error (a *ValidationError
// naming keys, or a parse error); it never panics and never returns a
// config together with an error.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"temporal: {address: 127.0.0.1:7233}\nmodules:\n  host: {repo: ., path: examples/host}\nmachines:\n  edge-1: {host: http://127.0.0.1:7401, tier: 1, modules: [host]}\n",
		"modules:\n  host: {repo: .}\n  host: {repo: .}\n",
		"machines:\n  e: {tier: -1, host: '::', modules: [nope]}\n",
		"machines:\n  ../etc: {tier: 1e9, modules: [a/b]}\n",
		"a: &x [*x]\n",
		"push: {retry_budget: 300}\n",
		"{",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			if c != nil {
				t.Fatalf("Parse returned a config with error %v", err)
			}
			var ve *ValidationError
			if errors.As(err, &ve) && len(ve.Problems) == 0 {
				t.Fatalf("validation error without problems: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config that does not validate: %v", err)
		}
	})
}
