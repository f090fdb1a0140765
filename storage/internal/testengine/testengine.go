// Package testengine is the one hook by which tests put the stores they
// open on PostgreSQL (HEARTH_TEST_ENGINE=postgres) and wrap their engines
// (storagetest.OpenWrapped): storage.Prepare and Open read it, and the
// TestMain of storage and of its domain packages (storagetest.Main) and
// storagetest's helpers set it. Nothing else sets it, so a running server
// never has it.
package testengine

import (
	"sync"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// Postgres, when set, gives the store of dir its PostgreSQL database: the
// DSN and a table prefix, the same prefix each time dir is opened so that a
// reopened store finds its records; ok false keeps the store on Badger.
var Postgres func(dir string) (dsn, prefix string, ok bool)

// wrappers holds, by directory, the wrapper a test gave the engine of the
// store it opens there (SetWrap).
var wrappers sync.Map

// SetWrap makes the store opened in dir use wrap(engine) instead of its
// engine.
func SetWrap(dir string, wrap func(kv.Engine) kv.Engine) { wrappers.Store(dir, wrap) }

// Wrapped is e as the store of dir uses it: wrapped when a test asked
// (SetWrap), else e itself.
func Wrapped(dir string, e kv.Engine) kv.Engine {
	if w, ok := wrappers.Load(dir); ok {
		return w.(func(kv.Engine) kv.Engine)(e)
	}
	return e
}
