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
// of a store (its search indexer) is a kind declared here
// (storage.NewWorkerKind), so Of may be called anywhere, as often as
// wanted, without allocating.
package library

import (
	"github.com/hearthkit/caddy-hearth/storage"
)

// Store is the members' libraries of one storage.Store.
type Store struct{ st *storage.Store }

// Of returns the libraries of st.
func Of(st *storage.Store) Store { return Store{st} }
