package cli

import (
	"fmt"
	"os"
	"os/user"
)

// whoami is how the starter learns who runs it and where: the operating
// system's word, which a lever records as --by's default and as the
// Temporal client identity it dials with. A test swaps it for a fake.
type whoami struct {
	current  func() (*user.User, error)
	getenv   func(string) string
	hostname func() (string, error)
	pid      int
}

// system is the real one.
var system = whoami{current: user.Current, getenv: os.Getenv, hostname: os.Hostname, pid: os.Getpid()}

// operator names the person running the starter: the account the process
// runs as, else $USER (a static binary without cgo on a system whose
// accounts are not in /etc/passwd), else "unknown".
func (w whoami) operator() string {
	if u, err := w.current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := w.getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

// identity is the Temporal client identity the starter dials with, and
// records in every lever's input beside --by: "alice@ops-1 pid 4242". The
// server keeps it in the history of every request this
// client makes (a workflow's start, an update's acceptance), so the two can
// be compared; the workflow code cannot read it, hence the copy in the
// input.
func (w whoami) identity() string {
	host, err := w.hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s@%s pid %d", w.operator(), host, w.pid)
}

// operator is system.operator: --by's default.
func operator() string { return system.operator() }

// ClientIdentity is the Temporal client identity this process's starter
// commands dial with and record beside --by (system.identity); the
// integration tests, which run the starter in process, compare with it.
func ClientIdentity() string { return system.identity() }
