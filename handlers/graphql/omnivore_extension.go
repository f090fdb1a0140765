package graphql

// The operations Omnivore's self-hosted browser extension sends besides
// setBookmarkArticle (web-extensions/extension-v3/src/scripts/omnivore-api.ts,
// omnivore-app/omnivore @322ce62): savePage, its toolbar's setLinkArchived,
// setLabels and updatePage; its label picker's labels and its "Add note"'s
// article, createHighlight and updateHighlight (labels and createHighlight
// are Omnivore's at OmnivorePath only: Inboxt's hold those names at Path,
// omnivore_path.go). The extension reads only errorCodes (and,
// after savePage, clientRequestId, the id it then names the item by), and
// reads them from the answer's data: a GraphQL error (no data) leaves its
// toolbar waiting, so a refusal it can be told of is an error type, as
// Omnivore's resolvers answered one.

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// SavePage saves as Omnivore's savePage did (resolvers/save/index.ts and
// services/save_page.ts, omnivore-app/omnivore @322ce62): the page's HTML
// the client sends is read with readability, not fetched (Hearth reads it
// as addArticleFromHtmlSnapshot does, articles.Service.SaveHTML), the
// client's title before the one readability finds, into the folder state
// names at savedAt, as saveUrl (omnivorePlacement). A URL saved before is
// that item saved again. Omnivore answered the item's id in
// clientRequestId; the extension names the item by it from then on.
func (r *mutationResolver) SavePage(ctx context.Context, in generated.SavePageInput) (generated.SaveResult, error) {
	id, err := memberID(ctx)
	if err != nil {
		return &generated.SaveError{ErrorCodes: []generated.SaveErrorCode{generated.SaveErrorCodeUnauthorized}}, nil
	}
	at, err := omnivorePlacement(in.State, in.SavedAt)
	if err != nil {
		return saveRefused(ctx, err)
	}
	var made []string
	if _, err = library.NormalizeURL(in.URL); err == nil && len(in.Labels) > 0 {
		// Checked first, a URL the save refuses makes no label.
		at.LabelIDs, made, err = r.labelIDsByName(ctx, id, in.Labels)
	}
	var it *library.SavedItem
	if err == nil {
		title := ""
		if in.Title != nil {
			title = *in.Title
		}
		it, err = r.s.articles.SaveHTML(ctx, id, in.URL, title, []byte(in.OriginalContent), "text/html; charset=utf-8", at)
	}
	if err != nil {
		// As saveUrl: a refused save leaves no label made for it.
		for _, l := range made {
			_, _ = library.Of(r.s.store).DeleteUnusedLabel(ctx, id, l)
		}
		labelsChanged(ctx)
		return saveRefused(ctx, err)
	}
	return &generated.SaveSuccess{URL: in.URL, ClientRequestID: it.ID}, nil
}

// saveRefused answers a refused savePage: a SaveError (UNKNOWN, Omnivore's
// code for a save that failed) with the reason when it is the member's to
// fix (a URL or page refused, a date refused) or the disk is full
// (saveRefusedForSpace), else the error as every operation answers the
// store's (logged, not said).
func saveRefused(ctx context.Context, err error) (generated.SaveResult, error) {
	if se := saveRefusedForSpace(ctx, err); se != nil {
		return se, nil
	}
	if msg, ok := articles.MemberMessage(err); ok {
		return &generated.SaveError{ErrorCodes: []generated.SaveErrorCode{generated.SaveErrorCodeUnknown}, Message: &msg}, nil
	}
	var ue *userError
	var se *shownFieldError
	if errors.As(err, &ue) || errors.As(err, &se) {
		msg := err.Error()
		return &generated.SaveError{ErrorCodes: []generated.SaveErrorCode{generated.SaveErrorCodeUnknown}, Message: &msg}, nil
	}
	return nil, err
}

// SetLinkArchived archives an item (archived true) or moves it back to the
// inbox, as Omnivore's setLinkArchivedResolver (resolvers/links/index.ts
// @322ce62), answering the item's id and link_archived or
// link_unarchived; an item the member has not is BAD_REQUEST, as there.
func (r *mutationResolver) SetLinkArchived(ctx context.Context, in generated.ArchiveLinkInput) (generated.ArchiveLinkResult, error) {
	id, err := memberID(ctx)
	if err != nil {
		return &generated.ArchiveLinkError{Message: "Unauthorized", ErrorCodes: []generated.ArchiveLinkErrorCode{generated.ArchiveLinkErrorCodeUnauthorized}}, nil
	}
	status, event := library.StatusArchived, "link_archived"
	if !in.Archived {
		status, event = library.StatusActive, "link_unarchived"
	}
	items, err := library.Of(r.s.store).SetItemsStatus(ctx, id, []string{in.LinkID}, status)
	if errors.Is(err, storage.ErrNotFound) || err == nil && len(items) == 0 {
		return &generated.ArchiveLinkError{Message: "no such item", ErrorCodes: []generated.ArchiveLinkErrorCode{generated.ArchiveLinkErrorCodeBadRequest}}, nil
	}
	if err != nil {
		return nil, err
	}
	return &generated.ArchiveLinkSuccess{LinkID: items[0].ID, Message: event}, nil
}

// SetLabels sets an item's labels, as Omnivore's setLabelsResolver
// (resolvers/labels/index.ts @322ce62): labels by name when given (made
// when missing), else labelIds, each of which must be the member's
// (NOT_FOUND, nothing changed); neither is BAD_REQUEST. An item the member
// has not is NOT_FOUND (Omnivore answered UNAUTHORIZED). The answer is
// the item's labels.
func (r *mutationResolver) SetLabels(ctx context.Context, in generated.SetLabelsInput) (generated.SetLabelsResult, error) {
	id, err := memberID(ctx)
	if err != nil {
		return setLabelsError(generated.SetLabelsErrorCodeUnauthorized), nil
	}
	if in.LabelIds == nil && len(in.Labels) == 0 {
		return setLabelsError(generated.SetLabelsErrorCodeBadRequest), nil
	}
	if len(in.LabelIds) > library.MaxBatchIDs {
		return setLabelsError(generated.SetLabelsErrorCodeBadRequest), nil
	}
	lib := library.Of(r.s.store)
	if _, err := lib.SavedItem(ctx, id, in.PageID); errors.Is(err, storage.ErrNotFound) {
		return setLabelsError(generated.SetLabelsErrorCodeNotFound), nil
	} else if err != nil {
		return nil, err
	}
	set := in.LabelIds
	var made []string
	if len(in.Labels) > 0 {
		set, made, err = r.labelIDsByName(ctx, id, in.Labels)
	}
	var items []*library.SavedItem
	if err == nil {
		if set == nil {
			set = []string{}
		}
		items, err = lib.SetItemLabels(ctx, id, []string{in.PageID}, library.LabelChange{Set: &set})
	}
	if err != nil {
		for _, l := range made {
			_, _ = lib.DeleteUnusedLabel(ctx, id, l)
		}
		labelsChanged(ctx)
	}
	var ie *storage.InvalidError
	var ue *userError
	switch {
	case errors.Is(err, storage.ErrNotFound) || err == nil && len(items) == 0:
		return setLabelsError(generated.SetLabelsErrorCodeNotFound), nil
	case errors.As(err, &ie) || errors.As(err, &ue):
		// A label refused (its name, its colour) or too many of them.
		return setLabelsError(generated.SetLabelsErrorCodeBadRequest), nil
	case err != nil:
		return nil, err
	}
	si, err := r.savedItem(ctx, items[0])
	if err != nil {
		return nil, err
	}
	labels := si.Labels
	if labels == nil {
		labels = []*generated.Label{}
	}
	return &generated.SetLabelsSuccess{Labels: labels}, nil
}

func setLabelsError(code generated.SetLabelsErrorCode) *generated.SetLabelsError {
	return &generated.SetLabelsError{ErrorCodes: []generated.SetLabelsErrorCode{code}}
}

// UpdatePage changes an item's title, description or author (byline), as
// Omnivore's updatePageResolver (resolvers/update/index.ts @322ce62) with
// the fields Hearth keeps, through updateSavedItemMetadata's
// library.UpdateItemMetadata. An item the member has not is NOT_FOUND; a
// value the library refuses (too long, an empty title) BAD_REQUEST.
func (r *mutationResolver) UpdatePage(ctx context.Context, in generated.UpdatePageInput) (generated.UpdatePageResult, error) {
	id, err := memberID(ctx)
	if err != nil {
		return updatePageError(generated.UpdatePageErrorCodeUnauthorized), nil
	}
	it, err := library.Of(r.s.store).UpdateItemMetadata(ctx, id, in.PageID, library.ItemMetadata{Title: in.Title, Description: in.Description, Author: in.Byline})
	var ie *storage.InvalidError
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return updatePageError(generated.UpdatePageErrorCodeNotFound), nil
	case errors.As(err, &ie):
		return updatePageError(generated.UpdatePageErrorCodeBadRequest), nil
	case err != nil:
		return nil, err
	}
	return &generated.UpdatePageSuccess{UpdatedPage: &generated.Article{ID: &it.ID}}, nil
}

func updatePageError(code generated.UpdatePageErrorCode) *generated.UpdatePageError {
	return &generated.UpdatePageError{ErrorCodes: []generated.UpdatePageErrorCode{code}}
}

// OmnivoreLabels is Omnivore's labels (labelsResolver,
// resolvers/labels/index.ts @322ce62), served as labels at OmnivorePath:
// the member's labels, in their order, which the extension's toolbar
// lists to choose from.
func (r *queryResolver) OmnivoreLabels(ctx context.Context) (generated.LabelsResult, error) {
	id, err := memberID(ctx)
	if err != nil {
		return &generated.LabelsError{ErrorCodes: []generated.LabelsErrorCode{generated.LabelsErrorCodeUnauthorized}}, nil
	}
	ls, err := library.Of(r.s.store).Labels(ctx, id)
	if err != nil {
		return nil, err
	}
	return &generated.LabelsSuccess{Labels: toLabels(ls)}, nil
}

// Article is Omnivore's article (getArticleResolver,
// resolvers/article/index.ts @322ce62): the member's item whose id is slug, as Omnivore took an
// id there (the extension sends the id savePage answered). Hearth's
// slugs (SearchItem.slug) are not unique, so they name no item here.
// username is always the caller, as there. The content is read only when
// the query selects it: the extension asks for the highlights alone. Its
// contentHtml is that of savedItem's article (itemContent): Omnivore's
// article and search answer the same stored content (content is
// readableContent for both, resolvers/function_resolvers.ts @322ce62), and
// what Hearth's search gives is without tracking pixels, its stored images
// on this site.
func (r *queryResolver) Article(ctx context.Context, _ string, slug string, _ *string) (generated.ArticleResult, error) {
	id, err := memberID(ctx)
	if err != nil {
		return articleError(generated.ArticleErrorCodeUnauthorized), nil
	}
	lib := library.Of(r.s.store)
	it, err := lib.SavedItem(ctx, id, slug)
	if errors.Is(err, storage.ErrNotFound) {
		return articleError(generated.ArticleErrorCodeNotFound), nil
	} else if err != nil {
		return nil, err
	}
	a := &generated.Article{ID: &it.ID}
	if fc := graphql.GetFieldContext(ctx); fc == nil || selectsAny(fc.Field.Selections, "contentHtml", "contentText") {
		c, err := r.s.itemContent(ctx, id, it.ID, it.OriginalURL)
		if err != nil {
			return nil, err
		}
		a.ContentHTML, a.ContentText = c.HTML, c.Text
	}
	return &generated.ArticleSuccess{Article: a}, nil
}

func articleError(code generated.ArticleErrorCode) *generated.ArticleError {
	return &generated.ArticleError{ErrorCodes: []generated.ArticleErrorCode{code}}
}

// rootSelects reports whether the root field being resolved selects a
// field named name, at any depth (true when it cannot tell): through the
// fast path (fastpath.go), a root field middleware, the field is the root
// field context's, gqlgen's field context not being made yet.
func rootSelects(ctx context.Context, name string) bool {
	if fc := graphql.GetFieldContext(ctx); fc != nil && fc.Field.Field != nil {
		return selectsAny(fc.Field.Selections, name)
	}
	if rc := graphql.GetRootFieldContext(ctx); rc != nil && rc.Field.Field != nil {
		return selectsAny(rc.Field.Selections, name)
	}
	return true
}

// selectsAny reports whether set selects a field of one of names, at any
// depth, through fragments.
func selectsAny(set ast.SelectionSet, names ...string) bool {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if slices.Contains(names, s.Name) || selectsAny(s.SelectionSet, names...) {
				return true
			}
		case *ast.InlineFragment:
			if selectsAny(s.SelectionSet, names...) {
				return true
			}
		case *ast.FragmentSpread:
			if s.Definition != nil && selectsAny(s.Definition.SelectionSet, names...) {
				return true
			}
		}
	}
	return false
}

// Highlights are the item's highlights and notes as search lists them:
// in the page's order, the notes (which have no place in it) last.
func (r *articleResolver) Highlights(ctx context.Context, obj *generated.Article, _ *generated.ArticleHighlightsInput) ([]*generated.Highlight, error) {
	if obj.ID == nil {
		return []*generated.Highlight{}, nil
	}
	out, err := r.itemHighlights(ctx, *obj.ID, compareInDocument)
	for i := range out {
		out[i].HighlightPositionAnchorIndex = &i
	}
	return out, err
}

// OmnivoreCreateHighlight is Omnivore's createHighlight
// (createHighlightResolver, resolvers/highlight/index.ts @322ce62), served
// as createHighlight at OmnivorePath. A NOTE (the extension's "Add note")
// is added to the item's note, a note on the item as a whole, which the
// first makes (library.Store.AddNote): the answer is that note. The
// extension means to add to the NOTE it finds, but looks for it where
// Omnivore's answer does not have it (data.article.highlights), so on
// Omnivore's server each of its notes was another NOTE. A HIGHLIGHT keeps its quote as an import keeps one
// without a place (library.Unplaced), and is placed in the item's text
// when the quote is found there, as an imported quote is once the page is
// fetched. Omnivore located it with its patch, which Hearth does not
// read. Hearth's ids are its own: the answer's highlight id is the one to
// name it by (Omnivore kept the client's id). Omnivore answered FORBIDDEN
// to every failure; here an item the member has not is NOT_FOUND, and a
// highlight the library refuses (no text, too long) BAD_DATA.
func (r *mutationResolver) OmnivoreCreateHighlight(ctx context.Context, in generated.OmnivoreCreateHighlightInput) (generated.CreateHighlightResult, error) {
	id, err := memberID(ctx)
	if err != nil {
		return createHighlightError(generated.CreateHighlightErrorCodeUnauthorized), nil
	}
	lib := library.Of(r.s.store)
	annotation := ""
	if in.Annotation != nil {
		annotation = *in.Annotation
	}
	var h *library.Highlight
	switch {
	case in.Type != nil && *in.Type == generated.HighlightTypeNote:
		h, err = lib.AddNote(ctx, id, in.ArticleID, annotation)
	case in.Type == nil || *in.Type == generated.HighlightTypeHighlight:
		if in.Quote == nil || strings.TrimSpace(*in.Quote) == "" {
			return createHighlightError(generated.CreateHighlightErrorCodeBadData), nil
		}
		seg := library.HighlightSegment{XPath: "/", Text: *in.Quote}
		if in.Prefix != nil {
			seg.BeforeText = clipFront(*in.Prefix, library.MaxSegmentContext)
		}
		if in.Suffix != nil {
			seg.AfterText = articles.Clip(*in.Suffix, library.MaxSegmentContext)
		}
		if h, err = lib.CreateHighlight(ctx, id, in.ArticleID, []library.HighlightSegment{seg}, annotation); err == nil {
			h, err = r.s.articles.PlaceQuote(ctx, id, h)
		}
	default:
		return createHighlightError(generated.CreateHighlightErrorCodeBadData), nil
	}
	var ie *storage.InvalidError
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return createHighlightError(generated.CreateHighlightErrorCodeNotFound), nil
	case errors.As(err, &ie):
		return createHighlightError(generated.CreateHighlightErrorCodeBadData), nil
	case err != nil:
		return nil, err
	}
	return &generated.CreateHighlightSuccess{Highlight: toHighlight(h)}, nil
}

func createHighlightError(code generated.CreateHighlightErrorCode) *generated.CreateHighlightError {
	return &generated.CreateHighlightError{ErrorCodes: []generated.CreateHighlightErrorCode{code}}
}

// UpdateHighlight is Omnivore's updateHighlight (updateHighlightResolver,
// resolvers/highlight/index.ts @322ce62): it changes a highlight's or a
// note's annotation (Hearth's note); without one it changes nothing.
// Omnivore's quote, html, color and sharedAt are not kept.
func (r *mutationResolver) UpdateHighlight(ctx context.Context, in generated.UpdateHighlightInput) (generated.UpdateHighlightResult, error) {
	id, err := memberID(ctx)
	if err != nil {
		return updateHighlightError(generated.UpdateHighlightErrorCodeUnauthorized), nil
	}
	lib := library.Of(r.s.store)
	var h *library.Highlight
	if in.Annotation != nil {
		h, err = lib.SetHighlightNote(ctx, id, in.HighlightID, *in.Annotation)
	} else {
		h, err = lib.Highlight(ctx, id, in.HighlightID)
	}
	var ie *storage.InvalidError
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return updateHighlightError(generated.UpdateHighlightErrorCodeNotFound), nil
	case errors.As(err, &ie):
		return updateHighlightError(generated.UpdateHighlightErrorCodeBadData), nil
	case err != nil:
		return nil, err
	}
	return &generated.UpdateHighlightSuccess{Highlight: toHighlight(h)}, nil
}

func updateHighlightError(code generated.UpdateHighlightErrorCode) *generated.UpdateHighlightError {
	return &generated.UpdateHighlightError{ErrorCodes: []generated.UpdateHighlightErrorCode{code}}
}
