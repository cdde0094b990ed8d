//go:build !unix

package devstack

import (
	"os"
	"syscall"
)

// sysProcAttr has nothing to set where there are no process groups.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// interrupt stops the process: without signals there is no gentler way.
func interrupt(p *os.Process) error { return p.Kill() }

// lockState does not lock where flock is missing; the ports, checked first,
// keep two stacks apart in practice.
func lockState(_, _ string) (func() error, error) { return func() error { return nil }, nil }
