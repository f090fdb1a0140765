//go:build !linux

package storage

// freeBytes is not measured on this system: the free-space reserve is not
// enforced.
func freeBytes(string) (int64, bool) { return 0, false }
