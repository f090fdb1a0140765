package graphql

import (
	"cmp"
	"slices"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/lexer"
	"github.com/vektah/gqlparser/v2/parser"
)

// OmnivorePath is the endpoint of Omnivore's operations alone. Omnivore's
// clients post to <their API URL>/api/graphql, so its browser extension,
// given https://<site>/omnivore as its API URL, posts here.
//
// Omnivore's schema and Inboxt's both have root fields named labels and
// createHighlight, with other arguments and answers: Path serves Inboxt's,
// which its clients need. Here a query names Omnivore's. A second
// generated schema would serve them, at the price of a second executor,
// a second set of resolvers and limits, and every Omnivore operation
// written twice; instead the one schema holds Omnivore's fields under
// Hearth's names (omnivoreRenames), and a query posted here has its
// Omnivore names replaced by them before gqlgen reads it, each renamed
// field aliased by the name the client wrote, so that its answer comes
// under that name. Everything after that (validation, limits, scopes,
// the fast path, errors) is what Path does. At Path, the Hearth names are
// Omnivore's operations like the others served there, under names no
// client of Inboxt's or Omnivore's sends.
const OmnivorePath = OmnivoreAPIURLPath + Path

// OmnivoreAPIURLPath, after the site's address, is what a member gives
// Omnivore's browser extension as its "API URL" (the extension appends
// Path), as the API Tokens page says beside a new token.
const OmnivoreAPIURLPath = "/omnivore"

// omnivoreName is a name as a query writes it: a root field of on
// (Query, Mutation), or with on empty, the type of a variable.
type omnivoreName struct{ on, name string }

// omnivoreRenames are Omnivore's names (schema.ts in omnivore-app/omnivore
// @322ce62) that this schema holds under Hearth's: the one table of them.
var omnivoreRenames = map[omnivoreName]string{
	{"Query", "labels"}:             "omnivoreLabels",
	{"Mutation", "createHighlight"}: "omnivoreCreateHighlight",
	// Omnivore's input of createHighlight, which its clients name in
	// their variables; Inboxt's has this name here.
	{"", "CreateHighlightInput"}: "OmnivoreCreateHighlightInput",
}

// renamedQueries remembers omnivoreQuery's answers for the queries posted
// to OmnivorePath, by the SHA-256 of the query (textCache): anyone may post
// any query there (up to the body's limit), and only the renamed text of a
// query the renaming changed is kept beside its digest, weighing its
// length. A query that needs no renaming, or that does not parse, keeps
// its 32-byte digest alone, as the document checker does
// (documentChecker).
type renamedQueries struct {
	c *textCache[string] // "": the query as posted
}

func newRenamedQueries(entries, budget int) renamedQueries {
	return renamedQueries{newTextCache[string](entries, budget)}
}

// of is omnivoreQuery(query), remembered.
func (rq renamedQueries) of(query string) string {
	if to, ok := rq.c.get(query); ok {
		if to == "" {
			return query
		}
		return to
	}
	to := omnivoreQuery(query)
	if to == query {
		rq.c.add(query, "", 0)
	} else {
		rq.c.add(query, to, len(to))
	}
	return to
}

// omnivoreQuery returns query with the names of omnivoreRenames replaced,
// a renamed field aliased by its name: `labels {` reads
// `labels: omnivoreLabels {`, `l: labels` reads `l: omnivoreLabels`, and
// `$input: CreateHighlightInput!` reads
// `$input: OmnivoreCreateHighlightInput!`. Only the query's names move:
// its strings, comments and lines stay as they were (so errors point at
// the client's lines). A query the parser refuses is returned unchanged,
// for gqlgen to refuse with its own error.
func omnivoreQuery(query string) string {
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, DefaultMaxTokens)
	if err != nil {
		return query
	}
	src := []rune(query)
	var edits []nameEdit
	for _, op := range doc.Operations {
		root := "Query"
		switch op.Operation {
		case ast.Mutation:
			root = "Mutation"
		case ast.Subscription:
			continue // none in the schema: gqlgen refuses it as written
		}
		edits = renameRootFields(edits, src, op.SelectionSet, root)
		for _, v := range op.VariableDefinitions {
			t := v.Type
			for t != nil && t.Elem != nil {
				t = t.Elem
			}
			if to, ok := omnivoreRenames[omnivoreName{"", t.NamedType}]; ok && t.Position != nil {
				edits = append(edits, nameEdit{at: t.Position.Start, n: len([]rune(t.NamedType)), to: to})
			}
		}
	}
	for _, f := range doc.Fragments {
		// A fragment on a root type holds root fields wherever it is
		// spread; its spreads are left alone so that it is renamed once.
		if f.TypeCondition == "Query" || f.TypeCondition == "Mutation" {
			edits = renameRootFields(edits, src, f.SelectionSet, f.TypeCondition)
		}
	}
	if len(edits) == 0 {
		return query
	}
	slices.SortFunc(edits, func(a, b nameEdit) int { return cmp.Compare(a.at, b.at) })
	out := make([]rune, 0, len(src)+32*len(edits))
	last := 0
	for _, e := range edits {
		out = append(out, src[last:e.at]...)
		out = append(out, []rune(e.to)...)
		last = e.at + e.n
	}
	return string(append(out, src[last:]...))
}

// nameEdit replaces the n runes of a query at rune offset at with to.
type nameEdit struct {
	at, n int
	to    string
}

// renameRootFields adds the edits of set's renamed fields, set being a
// selection on root (directly, or through inline fragments on it).
func renameRootFields(edits []nameEdit, src []rune, set ast.SelectionSet, root string) []nameEdit {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			to, ok := omnivoreRenames[omnivoreName{root, s.Name}]
			if !ok || s.Position == nil {
				continue
			}
			if e, ok := fieldNameEdit(src, s, to); ok {
				edits = append(edits, e)
			}
		case *ast.InlineFragment:
			if s.TypeCondition == "" || s.TypeCondition == root {
				edits = renameRootFields(edits, src, s.SelectionSet, root)
			}
		}
	}
	return edits
}

// fieldNameEdit is the edit that gives f the name to: the parser keeps
// where a field starts (its alias, or its name when it has none), so the
// tokens after that tell whether an alias was written.
func fieldNameEdit(src []rune, f *ast.Field, to string) (nameEdit, bool) {
	start := f.Position.Start
	if start < 0 || start >= len(src) {
		return nameEdit{}, false
	}
	lx := lexer.New(&ast.Source{Input: string(src[start:])})
	first, err := readToken(&lx)
	if err != nil || first.Kind != lexer.Name || first.Value != f.Alias {
		return nameEdit{}, false
	}
	next, err := readToken(&lx)
	if err != nil {
		return nameEdit{}, false
	}
	if next.Kind != lexer.Colon {
		// No alias: the name becomes the alias.
		n := first.Pos.End - first.Pos.Start
		return nameEdit{at: start + first.Pos.End, n: 0, to: ": " + to}, n > 0
	}
	name, err := readToken(&lx)
	if err != nil || name.Kind != lexer.Name || name.Value != f.Name {
		return nameEdit{}, false
	}
	return nameEdit{at: start + name.Pos.Start, n: name.Pos.End - name.Pos.Start, to: to}, true
}

// readToken is the lexer's next token that is not a comment.
func readToken(lx *lexer.Lexer) (lexer.Token, error) {
	for {
		t, err := lx.ReadToken()
		if err != nil || t.Kind != lexer.Comment {
			return t, err
		}
	}
}
