package graphql

import (
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// SetNoFastPath sends every entries field of s through gqlgen's executor
// (benchmarks of both paths, in package graphql_test).
func SetNoFastPath(s *Server, v bool) { s.noFastPath = v }

// StoreForTest opens a test's store in dir (storagetest.OpenFast: no
// sync, no garbage collection); this package's tests and graphql_test's
// open theirs here.
func StoreForTest(tb testing.TB, dir string) *storage.Store { return storagetest.OpenFast(tb, dir) }

// MemberForTest makes the member username in st (password "correct horse
// battery") and an API token of theirs.
func MemberForTest(tb testing.TB, st *storage.Store, username string) (*members.Member, string) {
	tb.Helper()
	m, err := members.Of(st).CreateMember(tb.Context(), username, username, "correct horse battery")
	if err != nil {
		tb.Fatal(err)
	}
	_, token, err := apitokens.Of(st).Create(tb.Context(), m.ID, "test", 0)
	if err != nil {
		tb.Fatal(err)
	}
	return m, token
}
