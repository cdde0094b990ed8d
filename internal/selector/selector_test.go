package selector

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAndMatch(t *testing.T) {
	canaryFra := map[string]string{"ring": "canary", "site": "fra1"}
	mainAms := map[string]string{"ring": "main", "site": "ams2", "gpu": ""}
	bare := map[string]string{}
	tests := []struct {
		sel  string
		str  string
		want [3]bool // canaryFra, mainAms, bare
	}{
		{"", "", [3]bool{true, true, true}},
		{"   ", "", [3]bool{true, true, true}},
		{"ring=canary", "ring=canary", [3]bool{true, false, false}},
		{"ring == canary", "ring=canary", [3]bool{true, false, false}},
		{"ring!=canary", "ring!=canary", [3]bool{false, true, true}},
		{"ring=canary,site=fra1", "ring=canary, site=fra1", [3]bool{true, false, false}},
		{"ring=canary, site=ams2", "ring=canary, site=ams2", [3]bool{false, false, false}},
		{"site in (fra1, ams2)", "site in (fra1, ams2)", [3]bool{true, true, false}},
		{"site in(fra1)", "site in (fra1)", [3]bool{true, false, false}},
		{"site notin (fra1)", "site notin (fra1)", [3]bool{false, true, true}},
		{"gpu", "gpu", [3]bool{false, true, false}},
		{"!gpu", "!gpu", [3]bool{true, false, true}},
		{"! gpu, site", "!gpu, site", [3]bool{true, false, false}},
		{"site in (fra1,ams2),ring!=main", "site in (fra1, ams2), ring!=main", [3]bool{true, false, false}},
		{"gpu=", "gpu=", [3]bool{false, true, false}},
		{"example.com/ring=canary", "example.com/ring=canary", [3]bool{false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.sel, func(t *testing.T) {
			s, err := Parse(tt.sel)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := s.String(); got != tt.str {
				t.Errorf("String = %q, want %q", got, tt.str)
			}
			for i, labels := range []map[string]string{canaryFra, mainAms, bare} {
				if got := s.Matches(labels); got != tt.want[i] {
					t.Errorf("Matches(%v) = %v, want %v", labels, got, tt.want[i])
				}
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	tests := []struct {
		sel    string
		pos    int
		reason string
	}{
		{"ring=canary,", 13, "a requirement must follow the comma"},
		{",ring", 1, "want a label key"},
		{"ring=canary site=x", 13, "want a comma between requirements"},
		{"ring>1", 5, "want =, ==, !=, in or notin"},
		{"site in fra1", 9, "want ( after in"},
		{"site in (fra1", 14, "want ) to close"},
		{"site in (fra1 ams2)", 15, "want a comma or )"},
		{"site notin ()", 13, "want a value"},
		{"site in (a,)", 12, "want a value"},
		{"-ring=canary", 1, "is not a label key"},
		{"ring=-canary", 6, "is not a label value"},
		{"ring=can/ary", 6, "is not a label value"},
		{"Example.com/ring", 1, "is not a label key"},
		{"!", 2, "want a label key, got the end"},
		{"ring=" + strings.Repeat("a", 64), 6, "is not a label value"},
		{"ring=(x)", 6, "want a comma between requirements"},
	}
	for _, tt := range tests {
		t.Run(tt.sel, func(t *testing.T) {
			_, err := Parse(tt.sel)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse = %v, want an *Error", err)
			}
			if e.Pos != tt.pos || !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("error at %d %q, want at %d containing %q", e.Pos, e.Reason, tt.pos, tt.reason)
			}
			if msg := err.Error(); !strings.Contains(msg, "selector \""+tt.sel+"\"") || !strings.Contains(msg, "position") {
				t.Errorf("message %q names neither the selector nor the position", msg)
			}
		})
	}
}

func TestCheckKeyValue(t *testing.T) {
	keys := map[string]bool{
		"ring": true, "topology.kubernetes.io/zone": true, "a_b.c-d": true, "R1": true,
		"": false, "-a": false, "a-": false, "a b": false, "/a": false, "A.com/a": false,
		strings.Repeat("k", 63): true, strings.Repeat("k", 64): false, "a/b/c": false,
	}
	for k, ok := range keys {
		if got := CheckKey(k) == ""; got != ok {
			t.Errorf("CheckKey(%q) ok = %v, want %v", k, got, ok)
		}
	}
	values := map[string]bool{"": true, "canary": true, "fra-1.b_2": true, "-x": false, "x y": false, "a/b": false, strings.Repeat("v", 64): false}
	for v, ok := range values {
		if got := CheckValue(v) == ""; got != ok {
			t.Errorf("CheckValue(%q) ok = %v, want %v", v, got, ok)
		}
	}
}
