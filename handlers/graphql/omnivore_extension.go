package graphql

// The operations Omnivore's self-hosted browser extension sends besides
// setBookmarkArticle (web-extensions/extension-v3/src/scripts/omnivore-api.ts,
// omnivore-app/omnivore @322ce62): savePage, its toolbar's setLinkArchived,
// setLabels and updatePage. The extension reads only errorCodes (and, after
// savePage, clientRequestId, the id it then names the item by), and reads
// them from the answer's data: a GraphQL error (no data) leaves its toolbar
// waiting, so a refusal it can be told of is an error type, as Omnivore's
// resolvers answered one. Its label picker (the root field labels, Inboxt's
// list here) and its note (Omnivore's createHighlight, whose argument and
// answer differ from Inboxt's createHighlight of the same name) are not
// served: see docs/omnivore.md.

import (
	"context"
	"errors"

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
	switch {
	case errors.Is(err, storage.ErrNotFound) || err == nil && len(items) == 0:
		return setLabelsError(generated.SetLabelsErrorCodeNotFound), nil
	case errors.As(err, &ie):
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
