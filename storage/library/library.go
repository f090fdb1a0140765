// Package library holds the members' libraries of hearth_graphql
// (handlers/graphql, handlers/importer): saved items with their content
// and labels, highlights, saved queries, the search over them (filter
// keys and a trigram text index kept by a background indexer), the queue
// of article fetches and the import jobs, over the engine-agnostic core in
// storage (keys under "u/<member>/gql/", "fetch/" and "import/").
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
