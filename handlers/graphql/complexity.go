package graphql

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/library/query"
)

// A query's cost, computed before it runs and refused above MaxComplexity
// with COMPLEXITY_LIMIT_EXCEEDED (422): every field costs 1, an object field
// 1 plus its selection, and a list field 1 plus its selection times the
// number of elements counted for it:
//
//   - Omnivore's search and updatesSince: their page size, plus searchCost;
//   - entries: its page size, plus searchCost when q filters by more
//     than a status and a type (query.FiltersBeyondListing): such a page may look
//     at many items, up to the library's search budget, to find a few, so
//     aliases of a search are priced rather than each reading that much;
//     labels (Omnivore's too), savedQueries, apiTokens and
//     importJobs: their storage limits; an import's failures: the
//     importFailuresShown it lists.
//   - the item lists that updateSavedItemsStatus and updateSavedItemsReadStatus
//     return: half the ids given (rounded up). The
//     items are the ones the client named, at most library.MaxBatchIDs, and
//     their scalars are short: Inboxt's bulk selection (14 scalars) on 500
//     ids costs 3501. Their content, the one large part, is priced below
//     and bounded at run time.
//   - reorderLabels and reorderSavedQueries: the number of ids given.
//   - an item's highlights (and an Omnivore article's): itemHighlights.
//     Storage allows up to library.MaxItemHighlights an item, far more
//     than a page of items is priced at, so this is an allowance for a
//     page of items with their highlights, not a bound.
//   - an item's labels and a highlight's segments: 1. They hold scalars
//     only, so they cannot nest further.
//
// The large scalars, an article's or a newsletter's contentHtml and
// contentText (up to library.MaxContentLen each), cost contentCost each,
// so that aliasing them multiplies their price. An item is an article or
// a newsletter, never both: its article and newsletter cost the larger of
// the two, not their sum. The price alone cannot bound a response (one
// content can be 8 MiB), so the contents a response carries are also
// counted as they are written (Options.MaxContentBytes, content.go).
//
// The highlights of an item are what makes nesting expensive: a
// highlight's savedItem is the item again, whose highlights have a
// savedItem, and so on, each level multiplying the response by the number
// of highlights (and the item's content comes with every copy). So below
// an item's highlights, a highlight's savedItem costs its article,
// newsletter and highlights repeatCost times over: such queries are
// refused, while the item's id, title, labels and other scalars stay cheap
// there. A page of highlight entries may repeat one item too, but only
// once per entry: it is priced as a page of items, and the content budget
// bounds the bytes.
//
// Introspection (__schema, __type) costs 1 plus its selection divided by
// introspectionUnit, rounded up, where its lists count the schema's own
// sizes: __Schema.types the number of types, __Schema.directives the
// number of directives, and the lists of a type (fields, args, enum values
// and so on) their average length in the schema. A selection on all types
// is then counted exactly (the standard introspection query costs about
// 1700); one on a single type (__type) may be undercounted by the ratio of
// its size to the average. Aliasing __schema multiplies its cost.
//
// A selection on an interface (entries' node) costs what it costs on the
// most expensive type that implements it, counting only the fragments that
// apply to that type.
const (
	itemHighlights       = 3
	repeatCost           = 1000
	contentCost          = 5
	mutationItemsPerUnit = 2
	introspectionUnit    = 10
	// searchCost lets the heaviest page sync clients ask for (100 items
	// with content, labels and highlights: 4501) run as a search, and
	// about a dozen searches of one item per request at the default limit.
	searchCost = 400
)

// setComplexity gives the list fields their counts (see above).
func setComplexity(c *generated.ComplexityRoot) {
	c.Query.Entries = func(child int, q generated.GetEntriesInput) int {
		cost := listCost(pageSize(q.First), child)
		if q.Q != nil && query.FiltersBeyondListing(*q.Q) {
			cost = addCost(cost, searchCost)
		}
		return cost
	}
	c.Query.Labels = func(child int) int { return listCost(library.MaxLabels, child) }
	c.Query.SavedQueries = func(child int) int { return listCost(library.MaxSavedQueries, child) }
	c.Query.APITokens = func(child int) int { return listCost(apitokens.MaxPerMember, child) }
	c.Query.ImportJobs = func(child int) int { return listCost(library.MaxImportJobs, child) }
	c.ImportJob.Failures = func(child int) int { return listCost(importFailuresShown, child) }
	c.SavedItem.Highlights = func(child int) int { return listCost(itemHighlights, child) }
	// Omnivore's: a page by offset (omnivore.go), priced as entries' page
	// with a search (it may walk to its offset), its items' highlights as
	// an item's.
	c.Query.Search = func(child int, after *string, first *int, _ *string, _ *bool, _ *string) int {
		size, _ := omnivorePage(first, after)
		return addCost(listCost(size, child), searchCost)
	}
	c.Query.UpdatesSince = func(child int, after *string, first *int, _ time.Time, _ *string) int {
		size, _ := omnivorePage(first, after)
		return addCost(listCost(size, child), searchCost)
	}
	c.SearchItem.Highlights = func(child int) int { return listCost(itemHighlights, child) }
	c.Article.Highlights = func(child int, _ *generated.ArticleHighlightsInput) int { return listCost(itemHighlights, child) }
	c.LabelsSuccess.Labels = func(child int) int { return listCost(library.MaxLabels, child) }
	c.Mutation.UpdateSavedItemsStatus = func(child int, in generated.UpdateSavedItemsStatusInput) int {
		return listCost(mutationItems(len(in.Ids)), child)
	}
	c.Mutation.UpdateSavedItemsReadStatus = func(child int, in generated.UpdateSavedItemsReadStatusInput) int {
		return listCost(mutationItems(len(in.Ids)), child)
	}
	c.Mutation.ReorderLabels = func(child int, in generated.ReorderLabelsInput) int {
		return listCost(len(in.Ids), child)
	}
	c.Mutation.ReorderSavedQueries = func(child int, in generated.ReorderSavedQueriesInput) int {
		return listCost(len(in.Ids), child)
	}
}

// mutationItems is the count of an item list a mutation returns for n ids.
func mutationItems(n int) int {
	return (n + mutationItemsPerUnit - 1) / mutationItemsPerUnit
}

// listCost is 1 + n×child, saturating instead of overflowing (an overflow
// could wrap to a small cost).
func listCost(n, child int) int {
	if n < 1 {
		n = 1
	}
	return addCost(1, mulCost(n, child))
}

// mulCost and addCost saturate at math.MaxInt, so that no cost or count
// of a document (limits.go's too) wraps around to a small one.
func mulCost(a, b int) int {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt/b {
		return math.MaxInt
	}
	return a * b
}

func addCost(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

// complexityLimit refuses operations that cost more than max, with gqlgen's
// code and message.
type complexityLimit struct {
	max   int
	es    graphql.ExecutableSchema
	intro map[string]int // introspectionCounts of es's schema
}

var _ interface {
	graphql.OperationContextMutator
	graphql.HandlerExtension
} = &complexityLimit{}

func (*complexityLimit) ExtensionName() string { return "ComplexityLimit" }

func (c *complexityLimit) Validate(es graphql.ExecutableSchema) error {
	c.es = es
	c.intro = introspectionCounts(es.Schema())
	return nil
}

func (c *complexityLimit) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	op := oc.Doc.Operations.ForName(oc.OperationName)
	if op == nil {
		return nil
	}
	if op.Operation == ast.Mutation {
		if n := pagesRead(op.SelectionSet, oc.Variables); n > 1 {
			err := gqlerror.Errorf("the operation reads %d whole pages (savePage, addArticleFromHtmlSnapshot, a HIGHLIGHT's createHighlight at the Omnivore endpoint); one operation may read one", n)
			errcode.Set(err, codeValidationFailed)
			return err
		}
	}
	cost := operationCost(ctx, c.es, c.intro, op, oc.Variables)
	if cost > c.max {
		err := gqlerror.Errorf("operation has complexity %d, which exceeds the limit of %d", cost, c.max)
		errcode.Set(err, codeComplexityLimit)
		return err
	}
	return nil
}

// pageReadingFields are the mutations that read a whole page: the page
// the client sends (articles.Service.SaveHTML), or the item's stored
// content, in which omnivoreCreateHighlight places a HIGHLIGHT's quote
// (articles.Service.PlaceQuote). Readability's pass over a page of up to
// the fetcher's size costs about a second of CPU, and a parse and walk of
// a stored content of several MiB a good part of one, where a field's
// price is a unit, so their aliases would multiply one request's cost by
// the number of aliases; an operation may hold one (pagesRead).
var pageReadingFields = []string{"savePage", "addArticleFromHtmlSnapshot", "omnivoreCreateHighlight"}

// pagesRead counts the page-reading root fields of a mutation's
// selection, its fragments' included (validation has resolved them and
// refused cycles); @skip and @include are not read, so a skipped one
// counts too. A createHighlight of type NOTE reads no page
// (library.Store.AddNote) and does not count; one without a type is a
// HIGHLIGHT.
func pagesRead(set ast.SelectionSet, vars map[string]any) int {
	n := 0
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			if slices.Contains(pageReadingFields, sel.Name) && !addsNote(sel, vars) {
				n++
			}
		case *ast.InlineFragment:
			n += pagesRead(sel.SelectionSet, vars)
		case *ast.FragmentSpread:
			if sel.Definition != nil {
				n += pagesRead(sel.Definition.SelectionSet, vars)
			}
		}
	}
	return n
}

// addsNote reports whether f is an omnivoreCreateHighlight whose input's
// type is NOTE, written in the query or in a variable (validated by
// then).
func addsNote(f *ast.Field, vars map[string]any) bool {
	if f.Name != "omnivoreCreateHighlight" {
		return false
	}
	in, _ := f.ArgumentMap(vars)["input"].(map[string]any)
	t, _ := in["type"].(string)
	return t == string(generated.HighlightTypeNote)
}

// introspectionCounts are the element counts of the introspection lists,
// by "Type.field" (see the top of this file).
func introspectionCounts(schema *ast.Schema) map[string]int {
	var types, fields, args, inputFields, enumValues, interfaces, possible, dirArgs int
	for _, t := range schema.Types {
		types++
		switch t.Kind {
		case ast.Object, ast.Interface:
			fields += len(t.Fields)
			for _, f := range t.Fields {
				args += len(f.Arguments)
			}
			interfaces += len(t.Interfaces)
		case ast.InputObject:
			inputFields += len(t.Fields)
		case ast.Enum:
			enumValues += len(t.EnumValues)
		}
		if t.IsAbstractType() {
			possible += len(schema.GetPossibleTypes(t))
		}
	}
	for _, d := range schema.Directives {
		dirArgs += len(d.Arguments)
	}
	avg := func(n, of int) int {
		if of < 1 {
			return n
		}
		return (n + of - 1) / of
	}
	return map[string]int{
		"__Schema.types":       types,
		"__Schema.directives":  len(schema.Directives),
		"__Type.fields":        avg(fields, types),
		"__Type.inputFields":   avg(inputFields, types),
		"__Type.enumValues":    avg(enumValues, types),
		"__Type.interfaces":    avg(interfaces, types),
		"__Type.possibleTypes": avg(possible, types),
		"__Field.args":         avg(args, fields),
		"__Directive.args":     avg(dirArgs, len(schema.Directives)),
	}
}

// operationCost is the cost of op (see the top of this file).
func operationCost(ctx context.Context, es graphql.ExecutableSchema, intro map[string]int, op *ast.OperationDefinition, vars map[string]any) int {
	w := costWalker{ctx: ctx, es: es, schema: es.Schema(), intro: intro, vars: vars}
	var root *ast.Definition
	switch op.Operation {
	case ast.Mutation:
		root = w.schema.Mutation
	case ast.Subscription:
		root = w.schema.Subscription
	default:
		root = w.schema.Query
	}
	if root == nil {
		return 0
	}
	return w.selection(op.SelectionSet, root, costContext{})
}

type costWalker struct {
	ctx    context.Context
	es     graphql.ExecutableSchema
	schema *ast.Schema
	intro  map[string]int
	vars   map[string]any
}

// costContext tells where a selection lies.
type costContext struct {
	inHighlights bool // below SavedItem.highlights or Article.highlights
	sameItem     bool // the selection of a highlight's savedItem there
}

// selection is the cost of set on typ: on an interface or union, the cost
// on its most expensive possible type.
func (w *costWalker) selection(set ast.SelectionSet, typ *ast.Definition, cc costContext) int {
	if !typ.IsAbstractType() {
		return w.selectionOn(set, typ, cc)
	}
	most := 0
	for _, t := range w.schema.GetPossibleTypes(typ) {
		most = max(most, w.selectionOn(set, t, cc))
	}
	return most
}

// costSum adds up a selection's cost; an item's article and newsletter
// apart, since only one of them can be non-null.
type costSum struct{ total, article, newsletter int }

// selectionOn is the cost of set on the object type typ, counting the
// fragments that apply to typ.
func (w *costWalker) selectionOn(set ast.SelectionSet, typ *ast.Definition, cc costContext) int {
	var sum costSum
	w.addSelection(&sum, set, typ, cc)
	return addCost(sum.total, max(sum.article, sum.newsletter))
}

func (w *costWalker) addSelection(sum *costSum, set ast.SelectionSet, typ *ast.Definition, cc costContext) {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			c := w.field(s, typ, cc)
			switch {
			case typ.Name == "SavedItem" && s.Name == "article":
				sum.article = addCost(sum.article, c)
			case typ.Name == "SavedItem" && s.Name == "newsletter":
				sum.newsletter = addCost(sum.newsletter, c)
			default:
				sum.total = addCost(sum.total, c)
			}
		case *ast.InlineFragment:
			if w.applies(s.TypeCondition, typ) {
				w.addSelection(sum, s.SelectionSet, typ, cc)
			}
		case *ast.FragmentSpread:
			if s.Definition != nil && w.applies(s.Definition.TypeCondition, typ) {
				w.addSelection(sum, s.Definition.SelectionSet, typ, cc)
			}
		}
	}
}

// applies reports whether a fragment on cond applies to the object type typ.
func (w *costWalker) applies(cond string, typ *ast.Definition) bool {
	if cond == "" || cond == typ.Name {
		return true
	}
	d := w.schema.Types[cond]
	if d == nil || !d.IsAbstractType() {
		return false
	}
	for _, t := range w.schema.GetPossibleTypes(d) {
		if t.Name == typ.Name {
			return true
		}
	}
	return false
}

func (w *costWalker) field(f *ast.Field, typ *ast.Definition, cc costContext) int {
	if f.Definition == nil {
		return 1
	}
	ft := w.schema.Types[f.Definition.Type.Name()]
	if ft == nil {
		return 1
	}
	switch typ.Name + "." + f.Name {
	case "Article.contentHtml", "Article.contentText", "Newsletter.contentHtml", "Newsletter.contentText", "SearchItem.content":
		return contentCost
	}
	child := 0
	if ft.Kind == ast.Object || ft.Kind == ast.Interface || ft.Kind == ast.Union {
		inner := costContext{inHighlights: cc.inHighlights}
		switch {
		case (typ.Name == "SavedItem" || typ.Name == "Article") && f.Name == "highlights":
			inner.inHighlights = true
		case typ.Name == "Highlight" && f.Name == "savedItem" && cc.inHighlights:
			inner.sameItem = true
		}
		child = w.selection(f.SelectionSet, ft, inner)
	}
	if typ == w.schema.Query && (f.Name == "__schema" || f.Name == "__type") {
		units := child / introspectionUnit
		if child%introspectionUnit != 0 {
			units++
		}
		return addCost(1, units)
	}
	if n, ok := w.intro[typ.Name+"."+f.Name]; ok {
		return listCost(n, child)
	}
	cost := 0
	if c, ok := w.es.Complexity(w.ctx, typ.Name, f.Name, child, f.ArgumentMap(w.vars)); ok && c >= 1 {
		cost = c
	} else {
		cost = addCost(1, child)
	}
	if cc.sameItem && typ.Name == "SavedItem" {
		switch f.Name {
		case "article", "newsletter", "highlights":
			cost = mulCost(repeatCost, cost)
		}
	}
	return cost
}
