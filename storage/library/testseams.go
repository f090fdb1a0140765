package library

import (
	"sync"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Seams for the tests of the packages above the library, which see a
// pending emptying of the trash as clients do (this package's tests set
// the options themselves: openWith). Nothing in production calls them.

// SetMaxHiddenPassed sets how many items of a pending emptying of the
// trash a page passes over before it ends short (options.maxHiddenPassed)
// in st, prepared and not open yet: a test meets pages cut short with a
// trash of hundreds of items rather than tens of thousands.
func SetMaxHiddenPassed(st *storage.Store, n int) { Of(st).state().opts.maxHiddenPassed = n }

// SetMaxItemHighlights sets how many highlights one item holds, and how
// many bytes they hold in all (options.maxItemHighlights,
// maxItemHighlightBytes), in st, prepared and not open yet: a test meets
// the limits with a few highlights rather than MaxItemHighlights.
func SetMaxItemHighlights(st *storage.Store, count, bytes int) {
	o := &Of(st).state().opts
	o.maxItemHighlights, o.maxItemHighlightBytes = count, bytes
}

// HoldEmptyings keeps st's indexer, whose work for a member carries on the
// emptying of the trash a request left (finishEmptyingTrash), from running
// until release is called, so that a test sees the emptying pending for as
// long as it needs. Searches meanwhile read the texts not indexed yet.
func HoldEmptyings(st *storage.Store) (release func()) {
	ix := Of(st).state().Indexer
	ix.Hold()
	return sync.OnceFunc(ix.Release)
}
