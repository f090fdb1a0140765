package graphql

import (
	"context"
	"math"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/storage"
)

// A query's cost, computed before it runs and refused above MaxComplexity
// with COMPLEXITY_LIMIT_EXCEEDED (422): every field costs 1, an object field
// 1 plus its selection, and a list field 1 plus its selection times the
// number of elements counted for it:
//
//   - entries: its page size; labels, savedQueries and apiTokens: their
//     storage limits.
//   - the item lists that updateSavedItemsStatus, updateSavedItemsReadStatus
//     and setSavedItemLabels return: half the ids given (rounded up). The
//     items are the ones the client named, at most storage.MaxBatchIDs, and
//     their scalars are short: Inboxt's bulk selection (14 scalars) on 500
//     ids costs 3501.
//   - reorderLabels and reorderSavedQueries: the number of ids given.
//   - an item's highlights: itemHighlights. Storage does not bound them, so
//     this is an allowance for a page of items with their highlights, not
//     a bound.
//   - an item's labels and a highlight's segments: 1. They hold scalars
//     only, so they cannot nest further.
//
// The highlights of an item are what makes nesting expensive: a
// highlight's savedItem is the item again, whose highlights have a
// savedItem, and so on, each level multiplying the response by the number
// of highlights (and the item's content, up to storage.MaxContentLen, comes
// with every copy). So below an item's highlights, a highlight's savedItem
// costs its article, newsletter and highlights repeatCost times over: such
// queries are refused, while the item's id, title, labels and other scalars
// stay cheap there.
//
// A selection on an interface (entries' node) costs what it costs on the
// most expensive type that implements it, counting only the fragments that
// apply to that type.
const (
	itemHighlights       = 3
	repeatCost           = 1000
	mutationItemsPerUnit = 2
)

// setComplexity gives the list fields their counts (see above).
func setComplexity(c *generated.ComplexityRoot) {
	c.Query.Entries = func(child int, q generated.GetEntriesInput) int {
		return listCost(pageSize(q.First), child)
	}
	c.Query.Labels = func(child int) int { return listCost(storage.MaxLabels, child) }
	c.Query.SavedQueries = func(child int) int { return listCost(storage.MaxSavedQueries, child) }
	c.Query.APITokens = func(child int) int { return listCost(storage.MaxAPITokensPerMember, child) }
	c.SavedItem.Highlights = func(child int) int { return listCost(itemHighlights, child) }
	c.Mutation.UpdateSavedItemsStatus = func(child int, in generated.UpdateSavedItemsStatusInput) int {
		return listCost(mutationItems(len(in.Ids)), child)
	}
	c.Mutation.UpdateSavedItemsReadStatus = func(child int, in generated.UpdateSavedItemsReadStatusInput) int {
		return listCost(mutationItems(len(in.Ids)), child)
	}
	c.Mutation.SetSavedItemLabels = func(child int, in generated.SetSavedItemLabelsInput) int {
		n := len(in.Ids)
		if in.ID != nil {
			n++
		}
		return listCost(mutationItems(n), child)
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
	max int
	es  graphql.ExecutableSchema
}

var _ interface {
	graphql.OperationContextMutator
	graphql.HandlerExtension
} = &complexityLimit{}

func (*complexityLimit) ExtensionName() string { return "ComplexityLimit" }

func (c *complexityLimit) Validate(es graphql.ExecutableSchema) error {
	c.es = es
	return nil
}

func (c *complexityLimit) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	op := oc.Doc.Operations.ForName(oc.OperationName)
	if op == nil {
		return nil
	}
	cost := operationCost(ctx, c.es, op, oc.Variables)
	if cost > c.max {
		err := gqlerror.Errorf("operation has complexity %d, which exceeds the limit of %d", cost, c.max)
		errcode.Set(err, codeComplexityLimit)
		return err
	}
	return nil
}

// operationCost is the cost of op (see the top of this file).
func operationCost(ctx context.Context, es graphql.ExecutableSchema, op *ast.OperationDefinition, vars map[string]any) int {
	w := costWalker{ctx: ctx, es: es, schema: es.Schema(), vars: vars}
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
	vars   map[string]any
}

// costContext tells where a selection lies.
type costContext struct {
	inHighlights bool // below SavedItem.highlights
	sameItem     bool // the selection of a highlight's savedItem below SavedItem.highlights
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

// selectionOn is the cost of set on the object type typ, counting the
// fragments that apply to typ.
func (w *costWalker) selectionOn(set ast.SelectionSet, typ *ast.Definition, cc costContext) int {
	total := 0
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			total = addCost(total, w.field(s, typ, cc))
		case *ast.InlineFragment:
			if w.applies(s.TypeCondition, typ) {
				total = addCost(total, w.selectionOn(s.SelectionSet, typ, cc))
			}
		case *ast.FragmentSpread:
			if s.Definition != nil && w.applies(s.Definition.TypeCondition, typ) {
				total = addCost(total, w.selectionOn(s.Definition.SelectionSet, typ, cc))
			}
		}
	}
	return total
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
	if ft == nil || ft.Name == "__Schema" {
		return 0 // introspection, as gqlgen counts it
	}
	child := 0
	if ft.Kind == ast.Object || ft.Kind == ast.Interface || ft.Kind == ast.Union {
		inner := costContext{inHighlights: cc.inHighlights}
		switch {
		case typ.Name == "SavedItem" && f.Name == "highlights":
			inner.inHighlights = true
		case typ.Name == "Highlight" && f.Name == "savedItem" && cc.inHighlights:
			inner.sameItem = true
		}
		child = w.selection(f.SelectionSet, ft, inner)
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
