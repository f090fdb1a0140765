package grants

import (
	"context"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// setNow sets the package clock to f and returns what sets it back.
func setNow(f func() time.Time) (restore func()) {
	clock.Store(&f)
	return func() { clock.Store(nil) }
}

// SetNow is setNow for the tests of the package grants_test.
var SetNow = setNow

// VacuumApps runs one pass of the sweep's removal of unused apps on st,
// and of its indexing of earlier app tokens, as the sweep does on its own
// every sweepPoll.
func VacuumApps(ctx context.Context, st *storage.Store) error {
	return sweepKind.Of(st).vacuum(ctx)
}
