package cli

import (
	"errors"
	"os/user"
	"testing"
)

// --by defaults to the account the starter runs as, then $USER, then
// "unknown"; the client identity names it with the host and the pid.
func TestWhoami(t *testing.T) {
	account := func(name string, err error) func() (*user.User, error) {
		return func() (*user.User, error) { return &user.User{Username: name}, err }
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "USER" {
				return v
			}
			return ""
		}
	}
	host := func(h string, err error) func() (string, error) { return func() (string, error) { return h, err } }
	lost := errors.New("no such user")
	cases := []struct {
		name               string
		w                  whoami
		operator, identity string
	}{
		{"account", whoami{account("alice", nil), env("mallory"), host("ops-1", nil), 42}, "alice", "alice@ops-1 pid 42"},
		{"account unknown: $USER", whoami{account("", lost), env("bob"), host("ops-1", nil), 7}, "bob", "bob@ops-1 pid 7"},
		{"empty account name: $USER", whoami{account("", nil), env("bob"), host("ops-1", nil), 7}, "bob", "bob@ops-1 pid 7"},
		{"neither", whoami{account("", lost), env(""), host("", errors.New("no hostname")), 1}, "unknown", "unknown@unknown-host pid 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.w.operator(); got != tc.operator {
				t.Errorf("operator() = %q, want %q", got, tc.operator)
			}
			if got := tc.w.identity(); got != tc.identity {
				t.Errorf("identity() = %q, want %q", got, tc.identity)
			}
		})
	}
}
