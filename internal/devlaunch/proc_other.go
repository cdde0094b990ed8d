//go:build !unix

package devlaunch

import (
	"os"
	"syscall"
)

// sysProcAttr has nothing to set where there are no process groups.
func sysProcAttr(_, _ bool) *syscall.SysProcAttr { return nil }

// interrupt stops the process: without signals there is no gentler way.
func interrupt(p *os.Process) error { return p.Kill() }
