package account

import "time"

// SetSessionTouchInterval changes how stale a last-seen time may get, for
// a test; the returned function restores it.
func SetSessionTouchInterval(d time.Duration) func() {
	old := sessionTouchInterval.Swap(int64(d))
	return func() { sessionTouchInterval.Store(old) }
}
