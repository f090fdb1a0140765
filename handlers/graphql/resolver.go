package graphql

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"

	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// resolver is the root of gqlgen's resolvers. Resolvers stay thin: they
// check the caller, call the store or a plain function of this package, and
// convert records to the schema's types.
type resolver struct{ s *Server }

func (r *resolver) Query() generated.QueryResolver         { return &queryResolver{r} }
func (r *resolver) Mutation() generated.MutationResolver   { return &mutationResolver{r} }
func (r *resolver) SavedItem() generated.SavedItemResolver { return &savedItemResolver{r} }
func (r *resolver) Highlight() generated.HighlightResolver { return &highlightResolver{r} }
func (r *resolver) User() generated.UserResolver           { return &userResolver{r} }
func (r *resolver) Article() generated.ArticleResolver     { return &articleResolver{r} }

type (
	queryResolver     struct{ *resolver }
	mutationResolver  struct{ *resolver }
	savedItemResolver struct{ *resolver }
	highlightResolver struct{ *resolver }
	userResolver      struct{ *resolver }
	articleResolver   struct{ *resolver }
)

// requestState is kept in the context of one request: the caller, and the
// member's labels loaded once for every SavedItem.labels of the response
// (and again after a mutation of the request changes labels).
type requestState struct {
	caller *caller
	// retryAfter is set by presentError when the store refused for now
	// (storage.Unavailable); transport.go sends it as Retry-After.
	retryAfter atomic.Int64
	// w and r are the HTTP exchange, for the session operations (signOut
	// clears the cookie; addresses are made on the request's site).
	w http.ResponseWriter
	r *http.Request

	labelsMu     sync.Mutex
	labelsLoaded bool
	labels       map[string]*library.Label
	labelsErr    error

	// stats are the reading statistics computed in this request, by
	// member: they may read the whole library (a store whose counts are
	// being built), so aliases of stats share one computation.
	statsMu sync.Mutex
	stats   map[string]*statsResult

	// renderMu lets one content be loaded or rendered at a time: Omnivore's
	// (searchItemResolver.Content) and an article's or newsletter's
	// (savedItemResolver.content).
	renderMu sync.Mutex

	// walked counts the items Omnivore's pages by offset walked in this
	// request to reach their offsets (offsetPager.page): every alias
	// draws on one allowance.
	walked atomic.Int64
}

type statsResult struct {
	once  sync.Once
	stats *generated.UserStats
	err   error
}

// labelsChanged drops the request's label cache: the mutations that
// create, rename, recolour, reorder or delete labels call it, so that later
// fields of the same request show the change.
func labelsChanged(ctx context.Context) {
	if st := stateOf(ctx); st != nil {
		st.labelsMu.Lock()
		st.labelsLoaded, st.labels, st.labelsErr = false, nil, nil
		st.labelsMu.Unlock()
	}
}

func stateOf(ctx context.Context) *requestState {
	st, _ := ctx.Value(callerKey{}).(*requestState)
	return st
}

func callerOf(ctx context.Context) *caller {
	if st := stateOf(ctx); st != nil {
		return st.caller
	}
	return nil
}

// errNoCaller answers a request without a token (or session) where one is
// needed: Inboxt's GqlAuthGuard throws UnauthorizedException() (message
// "Unauthorized"; common/guards/auth.guard.ts @ 45f4314).
var errNoCaller = &userError{codeUnauthorized, "Unauthorized"}

// memberID returns the id of the member the request acts for.
func memberID(ctx context.Context) (string, error) {
	c := callerOf(ctx)
	if c == nil {
		return "", errNoCaller
	}
	return c.Member.ID, nil
}

// labelByID returns the member's label id from the request's label cache.
func (r *resolver) labelByID(ctx context.Context, id string) (*library.Label, error) {
	st := stateOf(ctx)
	if st == nil {
		return nil, errNoCaller
	}
	st.labelsMu.Lock()
	defer st.labelsMu.Unlock()
	if !st.labelsLoaded {
		labels, err := library.Of(r.s.store).Labels(ctx, st.caller.Member.ID)
		st.labels, st.labelsErr, st.labelsLoaded = map[string]*library.Label{}, err, true
		for _, l := range labels {
			st.labels[l.ID] = l
		}
	}
	return st.labels[id], st.labelsErr
}

// --- conversions from storage records to schema types ---

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// savedItem converts a record to the schema's type, with its labels from
// the request's label cache. Both gqlgen's path and the entries fast path
// use it; it makes two allocations an item (the model with its optional
// strings, and its labels), not one per optional field.
func (r *resolver) savedItem(ctx context.Context, it *library.SavedItem) (*generated.SavedItem, error) {
	var labels []*generated.Label
	if len(it.LabelIDs) > 0 {
		one := make([]generated.Label, 0, len(it.LabelIDs))
		labels = make([]*generated.Label, 0, len(it.LabelIDs))
		for _, id := range it.LabelIDs {
			l, err := r.labelByID(ctx, id)
			if err != nil {
				return nil, err
			}
			if l != nil {
				one = append(one, labelOf(l))
				labels = append(labels, &one[len(one)-1])
			}
		}
	} else {
		labels = []*generated.Label{}
	}
	// The model and the values its pointers point to, in one allocation.
	v := &struct {
		m                                                     generated.SavedItem
		originalURL, sourceDomain, description, author, image string
		progress                                              float64
	}{
		originalURL: it.OriginalURL, sourceDomain: it.SourceDomain, description: it.Description,
		author: it.Author, image: it.LeadImage, progress: it.ReadingProgress,
	}
	opt := func(s *string) *string {
		if *s == "" {
			return nil
		}
		return s
	}
	v.m = generated.SavedItem{
		ID:              it.ID,
		CreatedAt:       it.CreatedAt,
		UpdatedAt:       it.UpdatedAt,
		Title:           it.Title,
		OriginalURL:     opt(&v.originalURL),
		SourceDomain:    opt(&v.sourceDomain),
		Description:     opt(&v.description),
		Author:          opt(&v.author),
		LeadImage:       opt(&v.image),
		WordCount:       float64(it.WordCount),
		Type:            generated.SavedItemType(it.Type),
		Status:          generated.SavedItemStatus(it.Status),
		ReadingProgress: &v.progress,
		ReadAt:          it.ReadAt,
		IsReadManual:    it.IsReadManual,
		Labels:          labels,
		LabelIDs:        it.LabelIDs,
	}
	return &v.m, nil
}

func (r *resolver) savedItems(ctx context.Context, items []*library.SavedItem) ([]*generated.SavedItem, error) {
	out := make([]*generated.SavedItem, len(items))
	for i, it := range items {
		var err error
		if out[i], err = r.savedItem(ctx, it); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func toHighlight(h *library.Highlight) *generated.Highlight {
	segs := make([]*generated.HighlightSegment, len(h.Segments))
	for i, sg := range h.Segments {
		segs[i] = &generated.HighlightSegment{
			ID:          sg.ID,
			Xpath:       sg.XPath,
			BeforeText:  sg.BeforeText,
			AfterText:   sg.AfterText,
			StartOffset: float64(sg.StartOffset),
			EndOffset:   float64(sg.EndOffset),
			Text:        optString(sg.Text),
		}
	}
	title := h.ItemTitle
	// Omnivore's highlightPositionPercent is never null (0 unknown).
	pct := h.PositionPercent
	out := &generated.Highlight{
		HighlightPositionPercent: &pct,
		ID:                       h.ID,
		CreatedAt:                h.CreatedAt,
		UpdatedAt:                h.UpdatedAt,
		SavedItemTitle:           &title,
		SavedItemOriginalURL:     optString(h.ItemURL),
		Segments:                 segs,
		Note:                     optString(h.Note),
		SavedItemID:              h.SavedItemID,
	}
	omnivoreHighlightFields(out) // omnivore.go
	if h.IsNote() {
		// A note on the item as a whole, which Inboxt's server never has:
		// Inboxt's web app shows a highlight by its segments' text alone
		// (its HighlightFragment asks for no note), so the note is the
		// text of one segment without a path, which the app's reader
		// draws nowhere (applyHighlightsToDOM skips a segment without
		// one, apps/web/src/utils/highlightsDOM.ts, Inboxt/inboxt@45f4314)
		// and its Highlights view lists as a highlight of that text.
		// Omnivore's fields, filled above, keep it a NOTE without quote.
		out.Segments = []*generated.HighlightSegment{{ID: h.ID, Text: optString(h.Note)}}
	}
	return out
}

func toLabel(l *library.Label) *generated.Label {
	v := labelOf(l)
	return &v
}

// notInternal is every label's Omnivore field internal: Omnivore's schema
// has it nullable, but its server always answered a boolean (the column is
// boolean, default false: omnivore-app/omnivore@322ce62,
// packages/api/src/entity/label.ts), and Hearth has no internal labels.
// Shared, never written.
var notInternal = false

func labelOf(l *library.Label) generated.Label {
	return generated.Label{ID: l.ID, CreatedAt: l.CreatedAt, Name: l.Name, Color: l.Color, Order: l.Order, Internal: &notInternal}
}

func toLabels(ls []*library.Label) []*generated.Label {
	out := make([]*generated.Label, len(ls))
	for i, l := range ls {
		out[i] = toLabel(l)
	}
	return out
}

func toSavedQuery(q *library.SavedQuery) *generated.SavedQuery {
	return &generated.SavedQuery{ID: q.ID, CreatedAt: q.CreatedAt, Name: q.Name, Query: q.Query, Order: q.Order}
}

func toSavedQueries(qs []*library.SavedQuery) []*generated.SavedQuery {
	out := make([]*generated.SavedQuery, len(qs))
	for i, q := range qs {
		out[i] = toSavedQuery(q)
	}
	return out
}

func toAPIToken(t *apitokens.Token) *generated.APIToken {
	return &generated.APIToken{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt}
}

// --- field resolvers ---

// content is the item's stored content for its article or newsletter
// field (itemContent), not read when the field selects no content.
func (r *savedItemResolver) content(ctx context.Context, obj *generated.SavedItem) (*library.ItemContent, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	// (The entries fast path calls this with its root field's context.)
	if fc := graphql.GetFieldContext(ctx); fc != nil && fc.Object == "SavedItem" && !selectsAny(fc.Field.Selections, "contentHtml", "contentText") {
		return &library.ItemContent{}, nil
	}
	base := ""
	if obj.OriginalURL != nil {
		base = *obj.OriginalURL
	}
	return r.s.itemContent(ctx, id, obj.ID, base)
}

// itemContent is the member's item's stored content as an Article's
// fields give it (siteImages; base is the item's original URL), loaded
// one at a time in a request and not at all once the request's content
// budget is spent: gqlgen's executor (which serves a page again when the
// entries fast path meets the budget) resolves a page's items, as a
// query's aliased root fields, at once, a goroutine each, each holding an
// item's content (its HTML and text, up to library.MaxContentLen), and the
// budget counts a content only as its fields are written. Past the budget
// the content is left empty: its fields are then refused by limitContent
// as they always were, with the same error at the same place.
func (s *Server) itemContent(ctx context.Context, memberID, itemID, base string) (*library.ItemContent, error) {
	if st := stateOf(ctx); st != nil {
		st.renderMu.Lock()
		defer st.renderMu.Unlock()
	}
	if contentBudgetOf(ctx).spent() {
		return &library.ItemContent{}, nil
	}
	c, err := library.Of(s.store).ItemContent(ctx, memberID, itemID)
	if errors.Is(err, storage.ErrNotFound) {
		return &library.ItemContent{}, nil
	}
	if err != nil {
		return nil, err
	}
	if c.HTML, err = s.siteImages(ctx, memberID, itemID, base, c.HTML); err != nil {
		return nil, err
	}
	return c, nil
}

// siteImages is an item's HTML as an Article's contentHtml gives it
// (Inboxt's savedItem and entries, Omnivore's article), which
// Inboxt's web app puts into its page as it is: without tracking pixels,
// its stored images at their address on this site (contentImages: for the
// app, export.ImageAPIPath, which it loads with its session cookie from
// the host of the API; for a script's API key, an address signed for the
// image, as Omnivore's content has), other images unchanged (articles.RewriteImages, as the feed and
// Omnivore's content leave the site). The highlights the app made on the
// content as saved still land: it anchors a highlight by the path of the
// element holding its text, each step a tag counted among same-named
// siblings, and by offsets into that element's text
// (getContainerTextNodePath and applyHighlightsToDOM in
// apps/web/src/utils/highlightsDOM.ts of Inboxt/inboxt @45f4314). An img
// holds no text, so no path steps through one, and dropping one changes
// only the numbers of the img elements after it, and no text.
// base is the item's original URL, against which its images' addresses
// were read when they were stored.
func (s *Server) siteImages(ctx context.Context, memberID, itemID, base, html string) (string, error) {
	if !articles.HasTag(html, "img") {
		return html, nil
	}
	links := contentImages(ctx)
	if links.Key == nil {
		// A session's page (Inboxt's web app, on this host) or a token's
		// client loads the image route with its own credentials: a path,
		// which stays right behind a proxy that ends TLS.
		links.Site = ""
	}
	files, err := links.Files(ctx, s.store, memberID, itemID, html)
	if err != nil {
		return "", err
	}
	return articles.RewriteImages(html, base, files), nil
}

func (r *savedItemResolver) Article(ctx context.Context, obj *generated.SavedItem) (*generated.Article, error) {
	if obj.Type != generated.SavedItemTypeArticle {
		return nil, nil
	}
	c, err := r.content(ctx, obj)
	if err != nil {
		return nil, err
	}
	return &generated.Article{ID: &obj.ID, ContentHTML: c.HTML, ContentText: c.Text}, nil
}

func (r *savedItemResolver) Newsletter(ctx context.Context, obj *generated.SavedItem) (*generated.Newsletter, error) {
	if obj.Type != generated.SavedItemTypeNewsletter {
		return nil, nil
	}
	c, err := r.content(ctx, obj)
	if err != nil {
		return nil, err
	}
	return &generated.Newsletter{ContentHTML: c.HTML, ContentText: c.Text}, nil
}

func (r *savedItemResolver) Highlights(ctx context.Context, obj *generated.SavedItem) ([]*generated.Highlight, error) {
	return r.itemHighlights(ctx, obj.ID, nil)
}

// itemHighlights is the caller's highlights of the item itemID as the
// API's model: in the store's order, or sorted by order when it is given.
func (r *resolver) itemHighlights(ctx context.Context, itemID string, order func(a, b *library.Highlight) int) ([]*generated.Highlight, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	hs, err := library.Of(r.s.store).ItemHighlights(ctx, id, itemID)
	if err != nil {
		return nil, err
	}
	if order != nil {
		slices.SortStableFunc(hs, order)
	}
	out := make([]*generated.Highlight, len(hs))
	for i, h := range hs {
		out[i] = toHighlight(h)
	}
	return out, nil
}

func (r *highlightResolver) SavedItem(ctx context.Context, obj *generated.Highlight) (*generated.SavedItem, error) {
	it, err := r.itemOf(ctx, obj)
	if it == nil || err != nil {
		return nil, err
	}
	return r.savedItem(ctx, it)
}

// itemOf returns the saved item of a highlight, or nil if it is gone.
func (r *resolver) itemOf(ctx context.Context, h *generated.Highlight) (*library.SavedItem, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	it, err := library.Of(r.s.store).SavedItem(ctx, id, h.SavedItemID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	return it, err
}

func (r *userResolver) LabelsCount(ctx context.Context, obj *generated.User) (float64, error) {
	ls, err := library.Of(r.s.store).Labels(ctx, obj.ID)
	return float64(len(ls)), err
}

func (r *userResolver) InboundEmailAddressesCount(ctx context.Context, obj *generated.User) (float64, error) {
	_, err := apitokens.Of(r.s.store).InboundInfo(ctx, obj.ID)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return 1, nil
}

// Stats are computed once per request and member, however many aliases
// ask for them (see requestState.stats).
func (r *userResolver) Stats(ctx context.Context, obj *generated.User) (*generated.UserStats, error) {
	st := stateOf(ctx)
	if st == nil {
		return nil, errNoCaller
	}
	st.statsMu.Lock()
	res := st.stats[obj.ID]
	if res == nil {
		res = &statsResult{}
		if st.stats == nil {
			st.stats = map[string]*statsResult{}
		}
		st.stats[obj.ID] = res
	}
	st.statsMu.Unlock()
	res.once.Do(func() { res.stats, res.err = r.s.readingStats(ctx, obj.ID) })
	return res.stats, res.err
}
