package graphql

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/handlers/graphql/scalar"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// The entries query is what sync integrations run over and over, a page of
// up to 100 entries with a dozen fields each. gqlgen's generic executor
// spends about 1 µs per field on it (a goroutine per edge, a closure and an
// allocation per value), ten times what reading the page from the store
// costs. entriesFast serves that root field itself: gqlgen still parses,
// validates and limits the operation, runs every other root field, and
// writes the response; entriesFast only turns the resolver's result into
// the field's JSON, walking the selection sets that gqlgen's CollectFields
// returns (so fragments, aliases, @skip and @include mean what they mean to
// gqlgen) and writing each value as gqlgen's marshalers do. The output is
// byte for byte gqlgen's (fastpath_test.go compares the two on many
// operations). Anything it does not cover — an error from a resolver, a
// @defer, a value gqlgen would reject — makes it step aside, and gqlgen
// executes the field as usual.

// entriesFast is a gqlgen root-field middleware.
func (s *Server) entriesFast(ctx context.Context, next graphql.RootResolver) (m graphql.Marshaler) {
	var w *jsonWriter
	// gqlgen recovers panics inside next, not in a middleware; a bug here
	// must not take the process down with it.
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("entries fast path: panic; gqlgen serves the field", zap.Any("panic", r), zap.Stack("stack"))
			if w != nil {
				w.releaseContent()
			}
			m = next(ctx)
		}
	}()
	fc := graphql.GetRootFieldContext(ctx)
	// (RootFieldContext.Object holds the field's name, not its type's.)
	if s.noFastPath || fc == nil || fc.Field.Field == nil ||
		fc.Field.ObjectDefinition == nil || fc.Field.ObjectDefinition.Name != "Query" {
		return next(ctx)
	}
	op := graphql.GetOperationContext(ctx)
	res := &resolver{s: s}
	var write func(w *jsonWriter) bool
	switch fc.Field.Name {
	case "entries":
		in, ok := entriesInput(fc.Field.ArgumentMap(op.Variables))
		if !ok {
			return next(ctx)
		}
		page, err := res.entriesPage(ctx, in)
		if err != nil {
			return next(ctx) // gqlgen reports it, with its path
		}
		write = func(w *jsonWriter) bool { return w.entryConnection(fc.Field.Selections, page) }
	case "search", "updatesSince": // fastpath_omnivore.go
		var ok bool
		if write, ok = omnivoreRoot(ctx, &fc.Field, op, res); !ok {
			return next(ctx)
		}
	default:
		return next(ctx)
	}
	buf := getBuffer()
	w = &jsonWriter{ctx: ctx, op: op, res: res, buf: buf.AvailableBuffer()}
	if !write(w) {
		putBuffer(buf)
		w.releaseContent()
		return next(ctx)
	}
	s.fastServed.Add(1)
	buf.Write(w.buf) // no copy when w.buf still lies in buf's storage
	// gqlgen writes each value of the response once, into its own buffer;
	// ours goes back to the pool then.
	var once sync.Once
	return graphql.WriterFunc(func(wr io.Writer) {
		once.Do(func() {
			_, _ = wr.Write(buf.Bytes())
			putBuffer(buf)
		})
	})
}

// entriesInput converts the entries argument as gqlgen's generated
// unmarshaler would (first defaults to 20); ok is false for anything
// unexpected, which gqlgen then handles.
func entriesInput(args map[string]any) (in generated.GetEntriesInput, ok bool) {
	m, ok := args["query"].(map[string]any)
	if !ok {
		return in, false
	}
	in.First = 20
	for k, v := range m {
		var err error
		switch k {
		case "first":
			in.First, err = graphql.UnmarshalFloat(v)
		case "after":
			in.After, err = optStringArg(v)
		case "q":
			in.Q, err = optStringArg(v)
		case "sort":
			in.Sort, err = sortArg(v)
		default:
			return in, false
		}
		if err != nil {
			return in, false
		}
	}
	return in, true
}

var errUnexpectedArg = errors.New("unexpected argument value")

func optStringArg(v any) (*string, error) {
	if v == nil {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, errUnexpectedArg
	}
	return &s, nil
}

func sortArg(v any) (*generated.EntrySort, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) != 2 {
		return nil, errUnexpectedArg
	}
	var sort generated.EntrySort
	if err := sort.Field.UnmarshalGQL(m["field"]); err != nil {
		return nil, err
	}
	if err := sort.Direction.UnmarshalGQL(m["direction"]); err != nil {
		return nil, err
	}
	return &sort, nil
}

// The implementors lists gqlgen's generated code passes to CollectFields.
var (
	connectionTypes = []string{"EntryConnection"}
	edgeTypes       = []string{"EntryEdge"}
	pageInfoTypes   = []string{"PageInfo"}
	savedItemTypes  = []string{"SavedItem", "Entry"}
	highlightTypes  = []string{"Highlight", "Entry"}
	segmentTypes    = []string{"HighlightSegment"}
	labelTypes      = []string{"Label"}
	articleTypes    = []string{"Article"}
	newsletterTypes = []string{"Newsletter"}
)

// jsonWriter appends one root field's JSON to buf. Each method returns
// false when gqlgen must serve the field instead.
type jsonWriter struct {
	ctx context.Context
	op  *graphql.OperationContext
	res *resolver
	buf []byte

	// CollectFields results of the selection sets met so far: every edge
	// of a page has the same ones.
	fields map[fieldsKey][]graphql.CollectedField

	// The operation's content budget (content.go) and the bytes taken from
	// it, given back if gqlgen writes the field instead.
	budget     *contentBudget
	hasBudget  bool
	contentLen int64
}

// takeContent counts a content string of n bytes; false past the budget,
// where gqlgen writes the field with its errors.
func (w *jsonWriter) takeContent(n int) bool {
	if !w.hasBudget {
		w.budget, w.hasBudget = contentBudgetOf(w.ctx), true
	}
	w.contentLen += int64(n)
	return w.budget.take(n)
}

func (w *jsonWriter) releaseContent() {
	w.budget.release(w.contentLen)
	w.contentLen = 0
}

// fieldsKey identifies a selection set as gqlgen's own CollectFields cache
// does: by its backing array and length, and the type asked for.
type fieldsKey struct {
	sel *ast.Selection
	n   int
	typ string
}

func (w *jsonWriter) collect(sel ast.SelectionSet, types []string) ([]graphql.CollectedField, bool) {
	k := fieldsKey{sel: unsafe.SliceData(sel), n: len(sel), typ: types[0]}
	if fs, ok := w.fields[k]; ok {
		return fs, true
	}
	fs := graphql.CollectFields(w.op, sel, types)
	for _, f := range fs {
		if len(f.Deferrables) > 0 {
			return nil, false
		}
	}
	fs = firstOfEachAlias(fs)
	if w.fields == nil {
		w.fields = map[fieldsKey][]graphql.CollectedField{}
	}
	w.fields[k] = fs
	return fs, true
}

// firstOfEachAlias drops the fields whose alias an earlier one has, as
// gqlgen writes only the first (a __typename asked of a union and of its
// member are two collected fields).
func firstOfEachAlias(fs []graphql.CollectedField) []graphql.CollectedField {
	for i := 1; i < len(fs); i++ {
		for j := range i {
			if fs[j].Alias == fs[i].Alias {
				out := slices.Clone(fs[:i])
				for _, f := range fs[i+1:] {
					if !slices.ContainsFunc(out, func(g graphql.CollectedField) bool { return g.Alias == f.Alias }) {
						out = append(out, f)
					}
				}
				return out
			}
		}
	}
	return fs
}

// object writes {"alias":value,...}, one value per collected field by
// value, which returns false for a field it cannot write.
func (w *jsonWriter) object(sel ast.SelectionSet, types []string, value func(f graphql.CollectedField) bool) bool {
	fields, ok := w.collect(sel, types)
	if !ok {
		return false
	}
	w.buf = append(w.buf, '{')
	for i, f := range fields {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		w.str(f.Alias)
		w.buf = append(w.buf, ':')
		if f.Name == "__typename" {
			w.str(types[0])
			continue
		}
		if !value(f) {
			return false
		}
	}
	w.buf = append(w.buf, '}')
	return true
}

func (w *jsonWriter) entryConnection(sel ast.SelectionSet, p *entriesPage) bool {
	return w.object(sel, connectionTypes, func(f graphql.CollectedField) bool {
		switch f.Name {
		case "edges":
			return w.list(len(p.cursors), func(i int) bool { return w.entryEdge(f.Selections, p, i, p.cursors[i]) })
		case "pageInfo":
			return w.pageInfo(f.Selections, &generated.PageInfo{EndCursor: p.endCursor(), StartCursor: p.startCursor(),
				HasNextPage: p.hasNext, HasPreviousPage: p.hasPrevious})
		}
		return false
	})
}

func (w *jsonWriter) entryEdge(sel ast.SelectionSet, p *entriesPage, i int, cursor string) bool {
	return w.object(sel, edgeTypes, func(f graphql.CollectedField) bool {
		switch f.Name {
		case "cursor":
			w.str(cursor)
			return true
		case "node":
			if p.highlights != nil {
				return w.highlight(f.Selections, toHighlight(p.highlights[i]))
			}
			return w.savedItem(f.Selections, p.items[i])
		}
		return false
	})
}

// pageInfo writes the PageInfo of an entries, search or updatesSince page
// (totalCount is search's only).
func (w *jsonWriter) pageInfo(sel ast.SelectionSet, p *generated.PageInfo) bool {
	return w.object(sel, pageInfoTypes, func(f graphql.CollectedField) bool {
		switch f.Name {
		case "endCursor":
			w.optStr(p.EndCursor)
		case "startCursor":
			w.optStr(p.StartCursor)
		case "hasNextPage":
			w.boolean(p.HasNextPage)
		case "hasPreviousPage":
			w.boolean(p.HasPreviousPage)
		case "totalCount":
			w.optInt(p.TotalCount)
		default:
			return false
		}
		return true
	})
}

// savedItem writes a stored item as gqlgen's path answers it: the fields
// come from the model resolver.savedItem makes (the one conversion both
// paths use: null for empty optional strings, labels that no longer exist
// left out), and article, newsletter and highlights from the same field
// resolvers gqlgen calls.
func (w *jsonWriter) savedItem(sel ast.SelectionSet, stored *library.SavedItem) bool {
	it, err := w.res.savedItem(w.ctx, stored)
	if err != nil {
		return false
	}
	return w.object(sel, savedItemTypes, func(f graphql.CollectedField) bool {
		switch f.Name {
		case "id":
			w.str(it.ID)
		case "createdAt":
			w.dateTime(it.CreatedAt)
		case "updatedAt":
			w.dateTime(it.UpdatedAt)
		case "title":
			w.str(it.Title)
		case "originalUrl":
			w.optStr(it.OriginalURL)
		case "sourceDomain":
			w.optStr(it.SourceDomain)
		case "description":
			w.optStr(it.Description)
		case "author":
			w.optStr(it.Author)
		case "leadImage":
			w.optStr(it.LeadImage)
		case "wordCount":
			return w.float(it.WordCount)
		case "type":
			w.str(it.Type.String())
		case "status":
			w.str(it.Status.String())
		case "readingProgress":
			return w.optFloat(it.ReadingProgress)
		case "readAt":
			w.optTime(it.ReadAt)
		case "isReadManual":
			w.boolean(it.IsReadManual)
		case "labels":
			return w.labels(f.Selections, it.Labels)
		case "article", "newsletter":
			return w.content(f, it)
		case "highlights":
			hs, err := (&savedItemResolver{w.res}).Highlights(w.ctx, it)
			return err == nil && w.highlights(f.Selections, hs)
		default:
			return false
		}
		return true
	})
}

// content writes SavedItem.article or SavedItem.newsletter.
func (w *jsonWriter) content(f graphql.CollectedField, it *generated.SavedItem) bool {
	r := &savedItemResolver{w.res}
	var html, text string
	var subscription *generated.NewsletterSubscription
	article := f.Name == "article"
	if article {
		a, err := r.Article(w.ctx, it)
		if err != nil {
			return false
		}
		if a == nil {
			w.null()
			return true
		}
		html, text = a.ContentHTML, a.ContentText
	} else {
		n, err := r.Newsletter(w.ctx, it)
		if err != nil {
			return false
		}
		if n == nil {
			w.null()
			return true
		}
		html, text, subscription = n.ContentHTML, n.ContentText, n.Subscription
	}
	types := newsletterTypes
	if article {
		types = articleTypes
	}
	return w.object(f.Selections, types, func(f graphql.CollectedField) bool {
		switch f.Name {
		case "contentHtml":
			return w.contentStr(html)
		case "contentText":
			return w.contentStr(text)
		case "subscription":
			if subscription != nil {
				return false
			}
			w.null()
		default:
			return false
		}
		return true
	})
}

func (w *jsonWriter) highlight(sel ast.SelectionSet, h *generated.Highlight) bool {
	return w.object(sel, highlightTypes, func(f graphql.CollectedField) bool {
		switch f.Name {
		case "id":
			w.str(h.ID)
		case "createdAt":
			w.dateTime(h.CreatedAt)
		case "updatedAt":
			w.dateTime(h.UpdatedAt)
		case "savedItem":
			it, err := w.res.itemOf(w.ctx, h)
			if err != nil {
				return false
			}
			if it == nil {
				w.null()
				return true
			}
			return w.savedItem(f.Selections, it)
		case "savedItemTitle":
			w.optStr(h.SavedItemTitle)
		case "savedItemOriginalUrl":
			w.optStr(h.SavedItemOriginalURL)
		case "note":
			return w.optContentStr(h.Note)
		case "segments":
			return writeList(w, h.Segments, func(sg *generated.HighlightSegment) bool { return w.segment(f.Selections, sg) })
		// Omnivore's fields (omnivore.go's omnivoreHighlightFields).
		case "quote", "prefix", "suffix", "patch", "annotation":
			return w.optContentStr(omnivoreHighlightText(h, f.Name))
		case "shortId":
			w.optStr(h.ShortID)
		case "color":
			w.optStr(h.Color)
		case "type":
			w.str(h.Type.String())
		case "highlightPositionPercent":
			return w.optFloat(h.HighlightPositionPercent)
		case "highlightPositionAnchorIndex":
			w.optInt(h.HighlightPositionAnchorIndex)
		case "labels":
			return w.labels(f.Selections, h.Labels)
		default:
			return false
		}
		return true
	})
}

// omnivoreHighlightText is the Omnivore text field of h by that name.
func omnivoreHighlightText(h *generated.Highlight, name string) *string {
	switch name {
	case "quote":
		return h.Quote
	case "prefix":
		return h.Prefix
	case "suffix":
		return h.Suffix
	case "patch":
		return h.Patch
	}
	return h.Annotation
}

func (w *jsonWriter) segment(sel ast.SelectionSet, sg *generated.HighlightSegment) bool {
	return w.object(sel, segmentTypes, func(f graphql.CollectedField) bool {
		switch f.Name {
		case "id":
			w.str(sg.ID)
		case "xpath":
			return w.contentStr(sg.Xpath)
		case "beforeText":
			return w.contentStr(sg.BeforeText)
		case "afterText":
			return w.contentStr(sg.AfterText)
		case "startOffset":
			return w.float(sg.StartOffset)
		case "endOffset":
			return w.float(sg.EndOffset)
		case "text":
			return w.optContentStr(sg.Text)
		default:
			return false
		}
		return true
	})
}

func (w *jsonWriter) label(sel ast.SelectionSet, l *generated.Label) bool {
	return w.object(sel, labelTypes, func(f graphql.CollectedField) bool {
		switch f.Name {
		case "id":
			w.str(l.ID)
		case "createdAt":
			w.dateTime(l.CreatedAt)
		case "name":
			w.str(l.Name)
		case "color":
			w.str(l.Color)
		case "order":
			return w.float(l.Order)
		// Omnivore's fields.
		case "description":
			w.optStr(l.Description)
		case "internal":
			w.optBool(l.Internal)
		case "source":
			w.optStr(l.Source)
		case "position":
			w.optInt(l.Position)
		default:
			return false
		}
		return true
	})
}

// list writes a JSON array of n values, each written by value(i).
func (w *jsonWriter) list(n int, value func(i int) bool) bool {
	w.buf = append(w.buf, '[')
	for i := range n {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		if !value(i) {
			return false
		}
	}
	w.buf = append(w.buf, ']')
	return true
}

// writeList writes a nullable list of objects: null for a nil list, else
// each element by value; a nil element goes back to gqlgen.
func writeList[T any](w *jsonWriter, l []*T, value func(*T) bool) bool {
	if l == nil {
		w.null()
		return true
	}
	return w.list(len(l), func(i int) bool { return l[i] != nil && value(l[i]) })
}

func (w *jsonWriter) labels(sel ast.SelectionSet, ls []*generated.Label) bool {
	return writeList(w, ls, func(l *generated.Label) bool { return w.label(sel, l) })
}

func (w *jsonWriter) highlights(sel ast.SelectionSet, hs []*generated.Highlight) bool {
	return writeList(w, hs, func(h *generated.Highlight) bool { return w.highlight(sel, h) })
}

// --- scalars, written as gqlgen's marshalers write them ---

const hexDigits = "0123456789ABCDEF"

// str writes s as graphql.MarshalString does: only control characters,
// backslash and double quote are escaped.
func (w *jsonWriter) str(s string) {
	w.buf = append(w.buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '\\' && c != '"' {
			continue
		}
		w.buf = append(w.buf, s[start:i]...)
		switch c {
		case '\t':
			w.buf = append(w.buf, `\t`...)
		case '\r':
			w.buf = append(w.buf, `\r`...)
		case '\n':
			w.buf = append(w.buf, `\n`...)
		case '\\':
			w.buf = append(w.buf, `\\`...)
		case '"':
			w.buf = append(w.buf, `\"`...)
		default:
			w.buf = append(w.buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	w.buf = append(w.buf, s[start:]...)
	w.buf = append(w.buf, '"')
}

func (w *jsonWriter) optStr(s *string) {
	if s == nil {
		w.null()
		return
	}
	w.str(*s)
}

// contentStr writes a string counted in the content budget (an article, a
// highlight's text); false past the budget.
func (w *jsonWriter) contentStr(s string) bool {
	if !w.takeContent(len(s)) {
		return false
	}
	w.str(s)
	return true
}

// optContentStr is contentStr of a nullable string.
func (w *jsonWriter) optContentStr(s *string) bool {
	if s == nil {
		w.null()
		return true
	}
	return w.contentStr(*s)
}

func (w *jsonWriter) optInt(n *int) {
	if n == nil {
		w.null()
		return
	}
	w.buf = strconv.AppendInt(w.buf, int64(*n), 10)
}

func (w *jsonWriter) optFloat(f *float64) bool {
	if f == nil {
		w.null()
		return true
	}
	return w.float(*f)
}

func (w *jsonWriter) optTime(t *time.Time) {
	if t == nil {
		w.null()
		return
	}
	w.dateTime(*t)
}

func (w *jsonWriter) optBool(b *bool) {
	if b == nil {
		w.null()
		return
	}
	w.boolean(*b)
}

func (w *jsonWriter) null() { w.buf = append(w.buf, "null"...) }

func (w *jsonWriter) boolean(b bool) { w.buf = strconv.AppendBool(w.buf, b) }

// float writes f as graphql.MarshalFloatContext does (fmt's %g); gqlgen
// refuses infinities and NaN, so they go back to it.
func (w *jsonWriter) float(f float64) bool {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return false
	}
	w.buf = strconv.AppendFloat(w.buf, f, 'g', -1, 64)
	return true
}

// dateTime writes t as scalar.MarshalDateTime does (scalar.Layout),
// digit by digit: time's layout interpreter was an eighth of a page.
func (w *jsonWriter) dateTime(t time.Time) {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		w.buf = append(w.buf, '"')
		w.buf = t.AppendFormat(w.buf, scalar.Layout)
		w.buf = append(w.buf, '"')
		return
	}
	hour, min, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	w.buf = append(w.buf, '"',
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+month/10), byte('0'+month%10), '-', byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':', byte('0'+min/10), byte('0'+min%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z', '"')
}

// fastPathStats is what the Server keeps for entriesFast.
type fastPathStats struct {
	// noFastPath sends every entries field through gqlgen (tests compare
	// the two).
	noFastPath bool
	// fastServed counts entries fields written by entriesFast.
	fastServed atomic.Int64
}
