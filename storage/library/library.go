// Package library holds the members' libraries of hearth_graphql (read
// and written by the GraphQL API, the library pages, the article
// pipeline, imports and exports under handlers/): saved items with their
// content and labels, highlights, saved queries, the search over them
// (filter keys, and the trigram index of storage/library/textindex kept
// by a background indexer), the queue of article fetches and the import
// jobs, over the engine-agnostic core in storage (keys under
// "u/<member>/gql/", "fetch/" and "import/"). Every write of an item and
// of the keys derived from it goes through writeItem and removeItem
// (itemwrite.go).
//
// A Store is a value holding only the *storage.Store: the library's state
// of a store (its options and its search indexer, storeState) is a kind
// declared here (storage.NewWorkerKind), so Of may be called anywhere, as
// often as wanted, without allocating.
package library

import (
	"sync/atomic"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library/textindex"
)

// Store is the members' libraries of one storage.Store.
type Store struct{ st *storage.Store }

// Of returns the libraries of st.
func Of(st *storage.Store) Store { return Store{st} }

// options tune a store's library: the search planner's budgets and the
// indexer's pace. Every store starts with defaultOptions; nothing in
// production sets others. The package's tests and benchmarks set them on
// a store between storage.Prepare and Open (openWith in library_test.go),
// so that each store says what it runs with and tests need no package
// state. They are read on hot paths from the store's storeState (a page
// takes a pointer to them, pageQuery.opts), never changed once the store
// is open.
type options struct {
	// candidateFloor is the least limit of the planner's cost model (tests
	// lower it to drive searches through the scan with a prefilter).
	candidateFloor int
	// maxSourceItems bounds the ids one filter's keys give a search:
	// filters that select more are checked per item, by key
	// (idSource.has) or by the match of the scan along the sort order.
	maxSourceItems int
	// recountChunkSize is how many labels or domains one recount
	// transaction counts (recountValues).
	recountChunkSize int
	// textIndexDelay is how long the indexer lets texts gather after a
	// change before it indexes them: a burst of saves (an import) becomes
	// a few large segments rather than one per item, which costs less to
	// write and merge. Searches meanwhile read those texts directly. (The
	// tests set 0: they look at the index right after a change.)
	textIndexDelay time.Duration
	// maxHiddenPassed is how many items of a pending emptying of the
	// trash (hidden from clients, outside the search budget) a page of
	// the trash passes over before it ends short, with the place it
	// reached for the next page (cutShort).
	maxHiddenPassed int
	// maxItemHighlights bounds the highlights of one item (its note
	// counts as one), MaxItemHighlights; tests lower it to meet the limit
	// with a few highlights.
	maxItemHighlights int
	// maxItemHighlightBytes bounds the bytes of one item's highlights
	// (highlightBytes).
	maxItemHighlightBytes int

	// For tests and benchmarks only (zero in production):

	// forcePlan, when not planWalk, makes every search with counted
	// filters take that plan where it can (each plan must give the same
	// answers).
	forcePlan planKind
	// tracePlan, when set, is told each plan's figures (the seeded
	// store's benchmark prints them).
	tracePlan func(string)
}

// defaultOptions are the options of every store (options).
func defaultOptions() options {
	return options{
		candidateFloor:        100,
		maxSourceItems:        10000,
		recountChunkSize:      1000,
		textIndexDelay:        500 * time.Millisecond,
		maxHiddenPassed:       10000,
		maxItemHighlights:     MaxItemHighlights,
		maxItemHighlightBytes: MaxItemHighlightBytes,
	}
}

// storeState is the library's state of one storage.Store, made when the
// store is prepared: its options and its search indexer (the Worker the
// store starts and stops; its work for a member is indexMember).
type storeState struct {
	*textindex.Indexer
	opts options
	// indexPaused keeps texts pending (tests of searches meanwhile;
	// atomic: the indexer's goroutine reads it while a test sets it).
	indexPaused atomic.Bool
	// emptying are the emptyings of the trash this process runs (trash.go).
	emptying emptyingRuns
}

// stateKind is the library's state of each Store.
var stateKind = storage.NewWorkerKind(newStoreState)

// state is s's library state.
func (s Store) state() *storeState { return stateKind.Of(s.st) }
