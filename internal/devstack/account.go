package devstack

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
)

// catalogue says where the catalogue is, without a DSN's password.
func (s *stack) catalogue() string {
	dsn := s.cfg.Catalogue.DSN
	if dsn == "" {
		return "sqlite:" + s.display(filepath.Join(s.state, "catalogue.db"))
	}
	if strings.HasPrefix(dsn, "sqlite:") {
		return dsn
	}
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		return u.Redacted() + "  (catalogue.dsn)"
	}
	return "catalogue.dsn"
}

// say prints one aligned line of the account: what, then where.
func (s *stack) say(what, format string, args ...any) {
	s.line(strings.TrimRight(fmt.Sprintf("%-10s %s", what, fmt.Sprintf(format, args...)), " "))
}

func (s *stack) line(l string) { _, _ = fmt.Fprintln(s.o.Out, l) }

// display shortens a path under the working directory to the relative form
// a person typed.
func (s *stack) display(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil || s.cwd == "" {
		return p
	}
	rel, err := filepath.Rel(s.cwd, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return abs
	}
	return rel
}

// dialable is addr as a browser or client can reach it: an unspecified
// host (all interfaces) becomes loopback.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
