package graphql

// Omnivore's operations (schema/omnivore.graphqls), as its Obsidian and
// Logseq plugins call them through @omnivore-app/api 1.0.4: search and
// updatesSince page by offset ("0", "15", …), setBookmarkArticle deletes,
// saveUrl saves. The shapes follow Omnivore's resolvers
// (packages/api/src/resolvers/article/index.ts, searchResolver,
// updatesSinceResolver, setBookmarkArticleResolver, omnivore-app/omnivore
// @322ce62); what differs is in docs/omnivore.md.

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/handlers/omnivore"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/library/query"
)

// Omnivore's page sizes (searchResolver: first defaults to 10, at most 100).
const (
	omnivoreDefaultPage = 10
	omnivoreMaxPage     = 100
	// omnivoreMaxQueryLen is searchResolver's limit on query (QUERY_TOO_LONG).
	omnivoreMaxQueryLen = 255
)

func (r *resolver) SearchItem() generated.SearchItemResolver { return &searchItemResolver{r} }

type searchItemResolver struct{ *resolver }

// omnivorePage reads Omnivore's first and after: a page size (default 10,
// at most 100) and an offset (anything but a non-negative integer is 0, as
// Number("x") is NaN there).
func omnivorePage(first *int, after *string) (size, offset int) {
	size = omnivoreDefaultPage
	if first != nil && *first > 0 {
		size = min(*first, omnivoreMaxPage)
	}
	if after != nil {
		if n, err := strconv.Atoi(strings.TrimSpace(*after)); err == nil && n > 0 {
			offset = n
		}
	}
	return size, offset
}

func (r *queryResolver) Search(ctx context.Context, after *string, first *int, searchQuery *string, includeContent *bool, format *string) (generated.SearchResult, error) {
	id, err := memberID(ctx)
	if err != nil {
		return &generated.SearchError{ErrorCodes: []generated.SearchErrorCode{generated.SearchErrorCodeUnauthorized}}, nil
	}
	q := ""
	if searchQuery != nil {
		q = *searchQuery
	}
	if len(q) > omnivoreMaxQueryLen {
		return &generated.SearchError{ErrorCodes: []generated.SearchErrorCode{generated.SearchErrorCodeQueryTooLong}}, nil
	}
	f := "html"
	if format != nil && *format != "" {
		f = *format
	}
	if !omnivore.ValidFormat(f) {
		return nil, badInput("format must be html, markdown or highlightedMarkdown, not %q", f)
	}
	srch, err := parseSearchIn(q, query.Omnivore)
	if err != nil {
		return nil, err
	}
	if srch.Highlights {
		// Omnivore's type:highlights lists pages of kind HIGHLIGHTS, which
		// Hearth has none of.
		return &generated.SearchSuccess{Edges: []*generated.SearchItemEdge{}, PageInfo: &generated.PageInfo{}}, nil
	}
	// Omnivore's default order is by saved time, newest first.
	order := sortOrder{Field: library.SortCreatedAt, Desc: true}
	if srch.Sort != nil {
		order = *srch.Sort
	}
	size, offset := omnivorePage(first, after)
	// The number of items matching is counted only for a client that asks
	// it, as Omnivore's PageInfo.totalCount resolver counts only when
	// selected (resolvers/function_resolvers.ts @322ce62): past a status
	// filter it may walk the query's items.
	page, err := r.s.offsets.page(ctx, r.s.store, id, "s\x00"+q, srch.Filter, order, offset, size, nil, rootSelects(ctx, "totalCount"))
	if err != nil {
		return nil, err
	}
	end := strconv.Itoa(offset + len(page.items))
	out := &generated.SearchSuccess{Edges: make([]*generated.SearchItemEdge, len(page.items))}
	for i, it := range page.items {
		node, err := r.searchItem(ctx, it, f)
		if err != nil {
			return nil, err
		}
		node.WithContent = includeContent != nil && *includeContent
		out.Edges[i] = &generated.SearchItemEdge{Cursor: end, Node: node}
	}
	start := ""
	if after != nil {
		start = *after
	}
	out.PageInfo = &generated.PageInfo{StartCursor: &start, EndCursor: &end, HasNextPage: page.hasNext}
	if total := page.total; total >= 0 {
		out.PageInfo.TotalCount = &total
	}
	return out, nil
}

func (r *queryResolver) UpdatesSince(ctx context.Context, after *string, first *int, since time.Time, folder *string) (generated.UpdatesSinceResult, error) {
	id, err := memberID(ctx)
	if err != nil {
		return &generated.UpdatesSinceError{ErrorCodes: []generated.UpdatesSinceErrorCode{generated.UpdatesSinceErrorCodeUnauthorized}}, nil
	}
	// As updatesSinceResolver: every status, updated since, most recent
	// first; then the items deleted for good since (tombstones).
	f := library.ItemFilter{Status: library.StatusAll, UpdatedFrom: &since}
	if folder != nil && *folder != "" && *folder != "all" {
		f.Status = query.OmnivoreFolder(strings.ToLower(*folder))
	}
	size, offset := omnivorePage(first, after)
	order := sortOrder{Field: library.SortUpdatedAt, Desc: true}
	key := "u\x00" + since.Format(time.RFC3339Nano)
	if folder != nil {
		key += "\x00" + *folder
	}
	page, err := r.s.offsets.page(ctx, r.s.store, id, key, f, order, offset, size, &since, false)
	if err != nil {
		return nil, err
	}
	end := strconv.Itoa(offset + len(page.items) + len(page.gone))
	out := &generated.UpdatesSinceSuccess{Edges: make([]*generated.SyncUpdatedItemEdge, 0, len(page.items)+len(page.gone))}
	for _, it := range page.items {
		node, err := r.searchItem(ctx, it, "html")
		if err != nil {
			return nil, err
		}
		reason := generated.UpdateReasonUpdated
		switch {
		case it.Status == library.StatusDeleted:
			reason = generated.UpdateReasonDeleted
		case !it.CreatedAt.Before(since):
			reason = generated.UpdateReasonCreated
		}
		out.Edges = append(out.Edges, &generated.SyncUpdatedItemEdge{Cursor: end, UpdateReason: reason, ItemID: it.ID, Node: node})
	}
	for _, t := range page.gone {
		out.Edges = append(out.Edges, &generated.SyncUpdatedItemEdge{Cursor: end, UpdateReason: generated.UpdateReasonDeleted, ItemID: t.ID, Node: tombstoneItem(t)})
	}
	start := ""
	if after != nil {
		start = *after
	}
	out.PageInfo = &generated.PageInfo{StartCursor: &start, EndCursor: &end, HasNextPage: page.hasNext}
	return out, nil
}

func (r *mutationResolver) SetBookmarkArticle(ctx context.Context, in generated.SetBookmarkArticleInput) (generated.SetBookmarkArticleResult, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	if in.Bookmark {
		// Omnivore's clients only unbookmark (delete); saving is saveUrl.
		return &generated.SetBookmarkArticleError{ErrorCodes: []generated.SetBookmarkArticleErrorCode{generated.SetBookmarkArticleErrorCodeBookmarkExists}}, nil
	}
	items, err := library.Of(r.s.store).SetItemsStatus(ctx, id, []string{in.ArticleID}, library.StatusDeleted)
	if errors.Is(err, storage.ErrNotFound) || err == nil && len(items) == 0 {
		return &generated.SetBookmarkArticleError{ErrorCodes: []generated.SetBookmarkArticleErrorCode{generated.SetBookmarkArticleErrorCodeNotFound}}, nil
	}
	if err != nil {
		return nil, err
	}
	return &generated.SetBookmarkArticleSuccess{BookmarkedArticle: &generated.Article{ID: &items[0].ID}}, nil
}

// defaultSaveLabelColor colours the labels saveUrl creates without one.
const defaultSaveLabelColor = "#7c7c7c"

// SaveURL saves as Omnivore's saveUrl did (services/save_url.ts and
// create_page_save_request.ts, then, once fetched, savePageJob and
// save_page.ts parsedContentToLibraryItem, omnivore-app/omnivore @322ce62):
// the item goes where state says (ARCHIVED: the archive, DELETED: the
// trash, any other or none: the inbox), also an item of that URL saved
// before, and is saved at savedAt, or now: Omnivore saved a URL saved
// before again at the time of the save. The placeholder Hearth saves at
// once is the item, so it is there from the save on, and the fetch keeps
// it there. folder, publishedAt, locale and timezone are not kept (see
// docs/omnivore.md).
func (r *mutationResolver) SaveURL(ctx context.Context, in generated.SaveURLInput) (generated.SaveResult, error) {
	id, err := memberID(ctx)
	if err != nil {
		return &generated.SaveError{ErrorCodes: []generated.SaveErrorCode{generated.SaveErrorCodeUnauthorized}}, nil
	}
	at, err := omnivorePlacement(in.State, in.SavedAt)
	if err != nil {
		return nil, err
	}
	var made []string
	if _, err = r.s.articles.CheckURL(in.URL); err == nil && len(in.Labels) > 0 {
		// Checked first, a URL the save refuses makes no label.
		at.LabelIDs, made, err = r.labelIDsByName(ctx, id, in.Labels)
	}
	var itemID string
	if err == nil {
		itemID, err = r.s.articles.QueueURL(ctx, id, in.URL, at)
	}
	if err != nil {
		// A refused save changes nothing: the labels made for it go,
		// unless another request has found one by its name and put it
		// on an item meanwhile.
		for _, l := range made {
			_, _ = library.Of(r.s.store).DeleteUnusedLabel(ctx, id, l)
		}
		labelsChanged(ctx)
		if se := saveRefusedForSpace(ctx, err); se != nil {
			return se, nil
		}
		return nil, err
	}
	// Omnivore answered the saved item's id (the one its clients then
	// find the item by) in clientRequestId.
	return &generated.SaveSuccess{URL: in.URL, ClientRequestID: itemID}, nil
}

// saveRefusedForSpace answers a save the store refused for lack of space
// (storage.ErrDiskFull) as Omnivore's clients can show it: a SaveError with
// UNKNOWN (SaveErrorCode in packages/api/src/schema.ts, omnivore-app/omnivore
// @322ce62, has no code for it; the npm client and the browser extension
// read errorCodes from the answer's data, and a GraphQL error leaves the
// extension's toolbar waiting) and a message saying the disk is full, with
// HTTP 200 and Retry-After as every full-disk answer of /api/graphql. nil
// when err is another.
func saveRefusedForSpace(ctx context.Context, err error) *generated.SaveError {
	status, retry, ok := storage.Unavailable(err)
	if !ok || status != http.StatusInsufficientStorage {
		return nil
	}
	if st := stateOf(ctx); st != nil {
		st.retryAfter.Store(int64(retry))
	}
	msg := account.StoreRefusalText(status)
	return &generated.SaveError{ErrorCodes: []generated.SaveErrorCode{generated.SaveErrorCodeUnknown}, Message: &msg}
}

// omnivorePlacement is where an Omnivore save puts the item: its state as
// Hearth's status, and its saved date (now when none is given), refused
// with a message a client shows when Hearth does not take it
// (library.CheckSavedAt).
func omnivorePlacement(state *generated.ArticleSavingRequestStatus, savedAt *time.Time) (articles.Placement, error) {
	at := articles.Placement{Status: library.StatusActive, SavedAt: storage.Now()}
	if state != nil {
		switch *state {
		case generated.ArticleSavingRequestStatusArchived:
			at.Status = library.StatusArchived
		case generated.ArticleSavingRequestStatusDeleted:
			at.Status = library.StatusDeleted
		}
	}
	if savedAt != nil {
		t, err := library.CheckSavedAt(*savedAt)
		var ie *storage.InvalidError
		if errors.As(err, &ie) {
			// The npm client shows a refusal's message only.
			return at, shownField(ie.Field, "%s", ie.Msg)
		}
		at.SavedAt = t
	}
	return at, nil
}

// labelIDsByName returns the ids of the member's labels with these names
// (compared as label names are, without case), creating those missing;
// made holds the ids of those it created, also when it fails part-way.
func (r *mutationResolver) labelIDsByName(ctx context.Context, memberID string, in []*generated.SaveURLLabelInput) (ids, made []string, err error) {
	if len(in) > library.MaxBatchIDs {
		return nil, nil, badInput("at most %d labels", library.MaxBatchIDs)
	}
	lib := library.Of(r.s.store)
	have, err := lib.Labels(ctx, memberID)
	if err != nil {
		return nil, nil, err
	}
	byName := make(map[string]string, len(have))
	for _, l := range have {
		byName[library.FoldText(l.Name)] = l.ID
	}
	ids = make([]string, 0, len(in))
	for _, l := range in {
		if id, ok := byName[library.FoldText(strings.TrimSpace(l.Name))]; ok {
			ids = append(ids, id)
			continue
		}
		color := defaultSaveLabelColor
		if l.Color != nil && *l.Color != "" {
			color = *l.Color
		}
		created, err := lib.CreateLabel(ctx, memberID, l.Name, color)
		labelsChanged(ctx)
		if err != nil {
			return nil, made, err
		}
		made = append(made, created.ID)
		byName[library.FoldText(created.Name)] = created.ID
		ids = append(ids, created.ID)
	}
	return ids, made, nil
}

// searchItem converts a record to Omnivore's SearchItem; its highlights
// and content are resolved only when asked for.
func (r *resolver) searchItem(ctx context.Context, it *library.SavedItem, format string) (*generated.SearchItem, error) {
	si, err := r.savedItem(ctx, it) // the labels, from the request's cache
	if err != nil {
		return nil, err
	}
	updated := it.UpdatedAt
	words := it.WordCount
	hl := it.HighlightCount
	n := &generated.SearchItem{
		ID:                     it.ID,
		Title:                  it.Title,
		Slug:                   export.Slug(it.Title, it.ID),
		URL:                    it.OriginalURL,
		PageType:               generated.PageTypeArticle,
		ContentReader:          generated.ContentReaderWeb,
		CreatedAt:              it.CreatedAt,
		SavedAt:                it.CreatedAt,
		UpdatedAt:              &updated,
		IsArchived:             it.Status == library.StatusArchived,
		ReadingProgressPercent: it.ReadingProgress,
		Author:                 si.Author,
		Image:                  si.LeadImage,
		Description:            si.Description,
		OriginalArticleURL:     si.OriginalURL,
		SiteName:               si.SourceDomain,
		Labels:                 si.Labels,
		ReadAt:                 it.ReadAt,
		WordsCount:             &words,
		HighlightsCount:        &hl,
		Folder:                 "inbox",
		Format:                 format,
	}
	state := generated.ArticleSavingRequestStatusSucceeded
	switch it.Status {
	case library.StatusArchived:
		n.Folder, state = "archive", generated.ArticleSavingRequestStatusArchived
	case library.StatusDeleted:
		state = generated.ArticleSavingRequestStatusDeleted
	}
	n.State = &state
	if it.Type == library.TypeNewsletter {
		n.PageType = generated.PageTypeUnknown
		n.Subscription = optString(it.FromName)
	}
	return n, nil
}

// tombstoneItem is what updatesSince shows of an item deleted for good.
func tombstoneItem(t *library.Tombstone) *generated.SearchItem {
	state := generated.ArticleSavingRequestStatusDeleted
	updated := t.DeletedAt
	pt := generated.PageTypeArticle
	if t.Type == library.TypeNewsletter {
		pt = generated.PageTypeUnknown
	}
	return &generated.SearchItem{
		ID: t.ID, Title: t.Title, Slug: export.Slug(t.Title, t.ID), URL: t.URL, OriginalArticleURL: optString(t.URL),
		PageType: pt, ContentReader: generated.ContentReaderWeb, CreatedAt: t.CreatedAt, SavedAt: t.CreatedAt,
		UpdatedAt: &updated, State: &state, Folder: "inbox", Labels: []*generated.Label{}, Gone: true,
	}
}

func (r *searchItemResolver) Highlights(ctx context.Context, obj *generated.SearchItem) ([]*generated.Highlight, error) {
	if obj.Gone || obj.HighlightsCount != nil && *obj.HighlightsCount == 0 {
		return []*generated.Highlight{}, nil
	}
	// In the page's order: the plugins' "by location" order reads
	// Omnivore's patch, which Hearth has not, and keeps this order then.
	out, err := r.itemHighlights(ctx, obj.ID, compareInDocument)
	for i := range out {
		out[i].HighlightPositionAnchorIndex = &i
	}
	return out, err
}

// compareInDocument orders highlights by where they start in the page:
// their first segments' XPaths step by step (/article[1]/p[2] before
// /article[1]/p[10]), then the offsets. Steps naming different elements
// at one level cannot be ordered without the page; they compare as text.
func compareInDocument(a, b *library.Highlight) int {
	if len(a.Segments) == 0 || len(b.Segments) == 0 {
		return cmp.Compare(len(b.Segments), len(a.Segments))
	}
	sa, sb := a.Segments[0], b.Segments[0]
	pa, pb := strings.Split(sa.XPath, "/"), strings.Split(sb.XPath, "/")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		na, ia := xpathStep(pa[i])
		nb, ib := xpathStep(pb[i])
		if na == nb {
			return cmp.Compare(ia, ib)
		}
		return strings.Compare(pa[i], pb[i])
	}
	if c := cmp.Compare(len(pa), len(pb)); c != 0 {
		return c
	}
	return cmp.Compare(sa.StartOffset, sb.StartOffset)
}

// xpathStep splits an XPath step such as p[2] into its name and index
// (1 when it has none).
func xpathStep(s string) (string, int) {
	name, rest, ok := strings.Cut(s, "[")
	if !ok {
		return s, 1
	}
	n, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
	if err != nil {
		return s, 1
	}
	return name, n
}

func (r *searchItemResolver) Content(ctx context.Context, obj *generated.SearchItem) (*string, error) {
	// Omnivore's clients ask for content in every search (their fragment
	// has it) but use it only with includeContent; without it, as for an
	// item deleted for good, content is null and costs nothing.
	if obj.Gone || !obj.WithContent {
		return nil, nil
	}
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	// A request renders one content at a time, and none once its content
	// budget is spent: gqlgen's executor (which serves a page again when
	// the fast path meets the budget) resolves a page's contents at once,
	// a goroutine an item, each holding an item's stored content (up to
	// 8 MiB), its parse and its rendering, and the budget counts a
	// content only once it is rendered.
	if st := stateOf(ctx); st != nil {
		st.renderMu.Lock()
		defer st.renderMu.Unlock()
	}
	if b := contentBudgetOf(ctx); b.spent() {
		return nil, b.err()
	}
	s, err := omnivore.Render(ctx, r.s.store, contentImages(ctx), id, obj.ID, obj.Format)
	if errors.Is(err, omnivore.ErrPending) {
		return nil, nil // the page is being fetched: no content yet
	}
	return s, err
}

// contentImages says where the content a request's caller gets shows
// the items' stored images: for an API key (the note-taking plugins',
// whose notes load images without credentials), at addresses signed with
// the key, so that deleting it ends them; for a session or an OAuth
// token, at the image route that takes the caller's own credentials.
func contentImages(ctx context.Context) export.ImageLinks {
	st := stateOf(ctx)
	l := export.ImageLinks{Site: inboxtapi.SiteURL(st.r)}
	if t := st.caller.APIToken; t != nil {
		k := t.ImageKey()
		l.Key = &k
	}
	return l
}

// --- Omnivore's fields of Highlight ---

// omnivoreHighlightFields fills Omnivore's fields of a highlight from
// Hearth's: plain fields rather than resolvers, as they cost no allocation
// for a highlight of one segment (Inboxt's, and most) and a resolver
// field costs a goroutine per highlight.
func omnivoreHighlightFields(h *generated.Highlight) {
	h.Type = generated.HighlightTypeHighlight
	h.ShortID = &h.ID
	h.Annotation = h.Note
	h.Labels = []*generated.Label{}
	if len(h.Segments) == 0 {
		// A note on the item as a whole (library.Highlight.IsNote).
		h.Type = generated.HighlightTypeNote
		return
	}
	h.Prefix = optString(h.Segments[0].BeforeText)
	h.Suffix = optString(h.Segments[len(h.Segments)-1].AfterText)
	if len(h.Segments) == 1 {
		h.Quote = h.Segments[0].Text
		return
	}
	h.Quote = optString(highlightQuote(h))
}

// highlightQuote is the highlighted text: the segments' texts, one line
// each (a highlight across paragraphs has a segment per paragraph).
func highlightQuote(h *generated.Highlight) string {
	var b strings.Builder
	for _, sg := range h.Segments {
		if sg.Text == nil || *sg.Text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(*sg.Text)
	}
	return b.String()
}
