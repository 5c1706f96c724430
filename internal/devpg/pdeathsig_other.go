//go:build unix && !linux

package devpg

import "syscall"

// setParentDeathSignal does nothing where the kernel has no parent death
// signal; a server left behind is stopped by the next start instead.
func setParentDeathSignal(*syscall.SysProcAttr) {}
