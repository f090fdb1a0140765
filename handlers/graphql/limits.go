package graphql

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
)

// A document's size is bounded before gqlgen parses and validates it:
// validation grows faster than the document (fields that may merge are
// compared in pairs; fragment spreads are expanded where they are used;
// every unknown field is one error with suggestions), so before these
// limits a 958-byte query of nested fragments cost seconds of CPU and a
// 16 KB one a 255 MB error list. checkDocument refuses, at a cost linear in
// the document's length:
//
//   - a query longer than MaxQueryBytes, or of more than MaxTokens tokens
//     (counted by gqlparser's own parser, which stops there);
//   - more than MaxFields fields once fragment spreads are expanded: a
//     fragment's expanded count is computed once (memoised) and added at
//     each spread, with saturating arithmetic, so nesting cannot blow it
//     up; this also bounds the fields that validation compares in pairs;
//   - one response name more than MaxSameName times in one selection set
//     (fragments flattened into it): validation compares the fields of a
//     name in pairs, with their selections, so 1000 repetitions of one
//     unknown field cost 145 ms and 93 MB before this limit;
//   - more than MaxAliases aliases, MaxFragmentSpreads fragment spreads or
//     MaxDirectives directives, as written.
//
// Refusals are Inboxt's (Apollo Server's) parse and validation failures:
// HTTP 400, GRAPHQL_PARSE_FAILED or GRAPHQL_VALIDATION_FAILED, with
// extensions.status. Error lists that validation still produces are cut
// at maxErrors with one summary error (capErrors). Documents that passed
// are remembered (by their text, as gqlgen's query cache), so a client's
// repeated query is checked once.
const (
	DefaultMaxQueryBytes      = 32 << 10
	DefaultMaxTokens          = 5000
	DefaultMaxFields          = 500
	DefaultMaxSameName        = 30
	DefaultMaxAliases         = 200
	DefaultMaxFragmentSpreads = 200
	DefaultMaxDirectives      = 50
	maxErrors                 = 100
	checkedDocuments          = 1000
)

// documentLimits are the limits of checkDocument (see above).
type documentLimits struct {
	maxBytes, maxTokens, maxFields, maxSameName, maxAliases, maxSpreads, maxDirectives int
}

func defaultDocumentLimits() documentLimits {
	return documentLimits{
		maxBytes:      DefaultMaxQueryBytes,
		maxTokens:     DefaultMaxTokens,
		maxFields:     DefaultMaxFields,
		maxSameName:   DefaultMaxSameName,
		maxAliases:    DefaultMaxAliases,
		maxSpreads:    DefaultMaxFragmentSpreads,
		maxDirectives: DefaultMaxDirectives,
	}
}

// documentError is a refused document: its code (GRAPHQL_PARSE_FAILED or
// GRAPHQL_VALIDATION_FAILED) and message.
type documentError struct {
	code, msg string
}

func (e *documentError) Error() string { return e.msg }

// documentCounts are what checkDocument counted (tests read them).
type documentCounts struct {
	fields, aliases, spreads, directives int
	// sameName is the most fields of one response name in a selection
	// set, and sameNameOf that name.
	sameName   int
	sameNameOf string
	// fragmentWalks counts the walks of fragment definitions: one per
	// fragment, however often it is spread.
	fragmentWalks int
}

// checkDocument applies lim to query (see above); it returns the counts
// and the refusal, if any.
func checkDocument(query string, lim documentLimits) (documentCounts, *documentError) {
	var c documentCounts
	if len(query) > lim.maxBytes {
		return c, &documentError{codeParseFailed, fmt.Sprintf("the query is %d bytes; at most %d are accepted", len(query), lim.maxBytes)}
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, lim.maxTokens)
	if err != nil {
		var gerr *gqlerror.Error
		msg := err.Error()
		if errors.As(err, &gerr) {
			msg = gerr.Message
		}
		if strings.Contains(msg, "exceeded token limit") {
			return c, &documentError{codeParseFailed, fmt.Sprintf("Syntax Error: the query has more than %d tokens", lim.maxTokens)}
		}
		// A syntax error within the limits: gqlgen reports it as it
		// reports every other (its parse is as cheap as this one).
		return c, nil
	}
	w := docWalker{lim: lim, c: &c, defs: map[string]*ast.FragmentDefinition{}, memo: map[string]int{}, names: map[string]map[string]int{}}
	for _, f := range doc.Fragments {
		if _, dup := w.defs[f.Name]; !dup {
			w.defs[f.Name] = f
		}
		c.directives += len(f.Directives)
	}
	// Aliases, spreads and directives as written; fields expanded.
	for _, f := range doc.Fragments {
		w.written(f.SelectionSet)
	}
	for _, op := range doc.Operations {
		c.directives += len(op.Directives)
		for _, v := range op.VariableDefinitions {
			c.directives += len(v.Directives)
		}
		w.written(op.SelectionSet)
		w.checkNames(op.SelectionSet)
		c.fields = addCost(c.fields, w.expanded(op.SelectionSet))
	}
	switch {
	case c.fields > lim.maxFields:
		return c, &documentError{codeValidationFailed, fmt.Sprintf("the query selects more than %d fields (fragments counted where they are spread)", lim.maxFields)}
	case c.sameName > lim.maxSameName:
		return c, &documentError{codeValidationFailed, fmt.Sprintf("the query selects %q %d times in one selection; at most %d are accepted", c.sameNameOf, c.sameName, lim.maxSameName)}
	case c.aliases > lim.maxAliases:
		return c, &documentError{codeValidationFailed, fmt.Sprintf("the query has %d aliases; at most %d are accepted", c.aliases, lim.maxAliases)}
	case c.spreads > lim.maxSpreads:
		return c, &documentError{codeValidationFailed, fmt.Sprintf("the query has %d fragment spreads; at most %d are accepted", c.spreads, lim.maxSpreads)}
	case c.directives > lim.maxDirectives:
		return c, &documentError{codeValidationFailed, fmt.Sprintf("the query has %d directives; at most %d are accepted", c.directives, lim.maxDirectives)}
	}
	return c, nil
}

type docWalker struct {
	lim  documentLimits
	c    *documentCounts
	defs map[string]*ast.FragmentDefinition
	// memo holds each fragment's expanded field count; -1 while it is
	// being computed (a cycle, which validation reports, counts 0).
	memo map[string]int
	// names holds each fragment's response names at its top level
	// (fragments flattened) with their counts; nil while being computed.
	names map[string]map[string]int
}

// checkNames records the most repeated response name of sel, fragments
// flattened into it.
func (w *docWalker) checkNames(sel ast.SelectionSet) {
	counts := map[string]int{}
	w.topNames(sel, counts)
	for name, n := range counts {
		if n > w.c.sameName {
			w.c.sameName, w.c.sameNameOf = n, name
		}
	}
}

// topNames adds the response names at the top level of sel to counts.
func (w *docWalker) topNames(sel ast.SelectionSet, counts map[string]int) {
	for _, s := range sel {
		switch s := s.(type) {
		case *ast.Field:
			name := s.Alias
			if name == "" {
				name = s.Name
			}
			counts[name] = addCost(counts[name], 1)
		case *ast.InlineFragment:
			w.topNames(s.SelectionSet, counts)
		case *ast.FragmentSpread:
			m, seen := w.names[s.Name]
			if !seen {
				def := w.defs[s.Name]
				if def == nil {
					continue
				}
				w.names[s.Name] = nil // a cycle adds nothing
				m = map[string]int{}
				w.topNames(def.SelectionSet, m)
				w.names[s.Name] = m
			}
			for name, n := range m {
				counts[name] = addCost(counts[name], n)
			}
		}
	}
}

// written counts the aliases, spreads and directives of sel as written.
func (w *docWalker) written(sel ast.SelectionSet) {
	for _, s := range sel {
		switch s := s.(type) {
		case *ast.Field:
			if s.Alias != "" && s.Alias != s.Name {
				w.c.aliases++
			}
			w.c.directives += len(s.Directives)
			w.written(s.SelectionSet)
		case *ast.InlineFragment:
			w.c.directives += len(s.Directives)
			w.written(s.SelectionSet)
		case *ast.FragmentSpread:
			w.c.spreads++
			w.c.directives += len(s.Directives)
		}
	}
}

// expanded returns the number of fields of sel with every fragment spread
// replaced by its fragment's fields, saturating at MaxInt.
func (w *docWalker) expanded(sel ast.SelectionSet) int {
	n := 0
	for _, s := range sel {
		switch s := s.(type) {
		case *ast.Field:
			if len(s.SelectionSet) > 0 {
				w.checkNames(s.SelectionSet)
			}
			n = addCost(n, addCost(1, w.expanded(s.SelectionSet)))
		case *ast.InlineFragment:
			n = addCost(n, w.expanded(s.SelectionSet))
		case *ast.FragmentSpread:
			n = addCost(n, w.fragment(s.Name))
		}
	}
	return n
}

func (w *docWalker) fragment(name string) int {
	if n, ok := w.memo[name]; ok {
		return max(n, 0)
	}
	def := w.defs[name]
	if def == nil {
		return 0 // unknown: validation reports it
	}
	w.memo[name] = -1
	w.c.fragmentWalks++
	n := w.expanded(def.SelectionSet)
	w.memo[name] = n
	return n
}

// documentChecker remembers the documents that passed checkDocument.
type documentChecker struct {
	lim    documentLimits
	passed *lru.LRU[struct{}]
}

func newDocumentChecker(lim documentLimits) *documentChecker {
	return &documentChecker{lim: lim, passed: lru.New[struct{}](checkedDocuments)}
}

// check returns the refusal of query, if any.
func (d *documentChecker) check(query string) *documentError {
	sum := sha256.Sum256([]byte(query)) // 32 bytes a document remembered, not 32 KiB
	key := string(sum[:])
	if _, ok := d.passed.Get(context.Background(), key); ok {
		return nil
	}
	if _, err := checkDocument(query, d.lim); err != nil {
		return err
	}
	d.passed.Add(context.Background(), key, struct{}{})
	return nil
}

// writeDocumentError answers a refused document as Apollo Server does:
// HTTP 400 and one error with the code and extensions.status.
func writeDocumentError(w http.ResponseWriter, e *documentError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []any{map[string]any{"message": e.msg, "extensions": map[string]any{"code": e.code, "status": http.StatusBadRequest}}},
	})
}

// capErrors keeps the first maxErrors errors of list and adds one that
// says how many more there were.
func capErrors(list gqlerror.List) gqlerror.List {
	if len(list) <= maxErrors {
		return list
	}
	more := len(list) - maxErrors
	out := append(gqlerror.List(nil), list[:maxErrors]...)
	summary := gqlerror.Errorf("%d more errors were left out", more)
	if code, ok := list[0].Extensions["code"]; ok {
		summary.Extensions = map[string]any{"code": code}
	}
	return append(out, summary)
}
