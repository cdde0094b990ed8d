//go:build unix && !linux

package execrt

import "syscall"

// parentDeathSignal does nothing where the kernel has no parent-death
// signal for us; an agent killed outright leaves its processes running.
func parentDeathSignal(*syscall.SysProcAttr) {}
