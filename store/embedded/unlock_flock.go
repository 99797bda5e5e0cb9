//go:build !windows && !plan9 && !solaris && !aix && !android

package embedded

import (
	"os"
	"syscall"
)

// unlock releases the flock bbolt took on f (the build constraint is
// bbolt's own for flock). Closing f is not enough when bbolt panicked
// while opening: its memory map still refers to the open file, which keeps
// the lock.
func unlock(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
