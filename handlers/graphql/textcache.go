package graphql

import (
	"context"
	"crypto/sha256"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/vektah/gqlparser/v2/ast"
)

// DefaultQueryCacheBytes bounds the query text the caches of parsed and
// renamed queries stand for. Anyone may post any document that passes the
// limits (limits.go), a client without a token included, and a parsed
// document holds its text and an AST about 20 times its size: 1,000
// distinct queries of 32 KiB kept about 500 MB. Two MiB of text (about
// 40 MB of ASTs) holds every operation of Inboxt's and Omnivore's clients
// many times over (Inboxt's 42 are about 60 KB).
const DefaultQueryCacheBytes = 2 << 20

// textCache is a least-recently-used cache of values by the SHA-256 of a
// client's text, bounded both by its entries and by the bytes its values
// hold (each value's weight, said when it is added), so that neither many
// small texts nor a few large ones make it grow past its bounds.
type textCache[V any] struct {
	mu     sync.Mutex
	lru    *simplelru.LRU[[sha256.Size]byte, weighed[V]]
	bytes  int // the weights of the values held
	budget int
}

type weighed[V any] struct {
	v V
	n int
}

func newTextCache[V any](entries, budget int) *textCache[V] {
	c := &textCache[V]{budget: budget}
	l, err := simplelru.NewLRU(entries, func(_ [sha256.Size]byte, e weighed[V]) { c.bytes -= e.n })
	if err != nil {
		panic("graphql: text cache: " + err.Error()) // entries > 0
	}
	c.lru = l
	return c
}

func (c *textCache[V]) get(text string) (V, bool) {
	key := sha256.Sum256([]byte(text))
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.lru.Get(key)
	return e.v, ok
}

// add keeps v for text, weighing n bytes; a value heavier than the budget
// is not kept.
func (c *textCache[V]) add(text string, v V, n int) {
	if n > c.budget {
		return
	}
	key := sha256.Sum256([]byte(text))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Contains(key) {
		return // the same text: the same value
	}
	c.lru.Add(key, weighed[V]{v, n})
	c.bytes += n
	for c.bytes > c.budget {
		c.lru.RemoveOldest()
	}
}

// documentCache is gqlgen's cache of parsed and validated documents
// (graphql.Cache) as a textCache: a document weighs its query's length.
type documentCache struct {
	c *textCache[*ast.QueryDocument]
}

func newDocumentCache(entries, budget int) documentCache {
	return documentCache{newTextCache[*ast.QueryDocument](entries, budget)}
}

func (d documentCache) Get(_ context.Context, query string) (*ast.QueryDocument, bool) {
	return d.c.get(query)
}

func (d documentCache) Add(_ context.Context, query string, doc *ast.QueryDocument) {
	d.c.add(query, doc, len(query))
}

// held is how many values the cache holds and the bytes they weigh.
func (c *textCache[V]) held() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}
