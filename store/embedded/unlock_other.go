//go:build windows || plan9 || solaris || aix || android

package embedded

import "os"

// unlock does nothing: on these systems bbolt's lock goes with the file
// handle, which the caller closes.
func unlock(*os.File) {}
