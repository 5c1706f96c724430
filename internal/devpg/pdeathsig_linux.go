package devpg

import "syscall"

// setParentDeathSignal asks the kernel for a fast shutdown of the server
// when hookyard dies without stopping it (kill -9, a crash): otherwise the
// server outlives the run, holds the port and the next run finds it.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGINT
}
