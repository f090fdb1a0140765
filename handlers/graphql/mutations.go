package graphql

import (
	"context"
	"errors"

	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

var success = &generated.Void{Success: true}

func (r *mutationResolver) AddArticleFromURL(ctx context.Context, in generated.AddArticleFromURLInput) (*generated.Void, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	itemID, err := r.s.articles.QueueURL(ctx, id, in.URL, articles.Placement{LabelIDs: in.LabelIds})
	if err != nil {
		return nil, err
	}
	return &generated.Void{Success: true, ID: &itemID}, nil
}

func (r *mutationResolver) AddArticleFromHTMLSnapshot(ctx context.Context, in generated.AddArticleFromHTMLSnapshotInput) (string, error) {
	id, err := memberID(ctx)
	if err != nil {
		return "", err
	}
	it, err := r.s.articles.SaveHTML(ctx, id, in.URL, "", []byte(in.HTML), "text/html; charset=utf-8", articles.Placement{})
	if err != nil {
		return "", err
	}
	return it.ID, nil
}

func (r *mutationResolver) UpdateSavedItemsStatus(ctx context.Context, in generated.UpdateSavedItemsStatusInput) ([]*generated.SavedItem, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	items, err := library.Of(r.s.store).SetItemsStatus(ctx, id, in.Ids, string(in.Status))
	if err != nil {
		return nil, err
	}
	return r.savedItems(ctx, items)
}

func (r *mutationResolver) UpdateSavedItemMetadata(ctx context.Context, in generated.UpdateSavedItemMetadataInput) (*generated.SavedItem, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	it, err := library.Of(r.s.store).UpdateItemMetadata(ctx, id, in.ID, library.ItemMetadata{Title: in.Title, Description: in.Description, Author: in.Author})
	if err != nil {
		return nil, err
	}
	return r.savedItem(ctx, it)
}

func (r *mutationResolver) UpdateSavedItemsReadStatus(ctx context.Context, in generated.UpdateSavedItemsReadStatusInput) ([]*generated.SavedItem, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	items, err := library.Of(r.s.store).SetItemsRead(ctx, id, in.Ids, in.IsRead)
	if err != nil {
		return nil, err
	}
	return r.savedItems(ctx, items)
}

func (r *mutationResolver) UpdateReadingProgress(ctx context.Context, in generated.UpdateReadingProgressInput) (*generated.SavedItem, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	it, err := library.Of(r.s.store).UpdateReadingProgress(ctx, id, in.ID, in.Progress)
	if err != nil {
		return nil, err
	}
	return r.savedItem(ctx, it)
}

// SetSavedItemLabels follows Inboxt's setSavedItemLabels
// (saved-item.resolver.ts and saved-item.service.ts setManyLabels @ 45f4314):
// ids wins over id; no ids does nothing; unknown items and unknown label ids
// are skipped; labelIds, when given (even empty), replaces the labels and
// addLabelIds/removeLabelIds are then ignored; otherwise addLabelIds are
// added and removeLabelIds removed.
func (r *mutationResolver) SetSavedItemLabels(ctx context.Context, in generated.SetSavedItemLabelsInput) (*generated.Void, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	ids := in.Ids
	if ids == nil && in.ID != nil {
		ids = []string{*in.ID}
	}
	if len(ids) == 0 {
		return success, nil
	}
	if len(ids) > library.MaxBatchIDs {
		return nil, badInput("at most %d ids at once", library.MaxBatchIDs)
	}
	c := library.LabelChange{SkipUnknown: true}
	if in.LabelIds != nil {
		set := in.LabelIds
		c.Set = &set
	} else {
		c.Add, c.Remove = in.AddLabelIds, in.RemoveLabelIds
		if len(c.Add) == 0 && len(c.Remove) == 0 {
			return success, nil
		}
	}
	items, err := library.Of(r.s.store).SavedItems(ctx, id, ids)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return success, nil
	}
	known := make([]string, len(items))
	for i, it := range items {
		known[i] = it.ID
	}
	if _, err := library.Of(r.s.store).SetItemLabels(ctx, id, known, c); err != nil {
		return nil, err
	}
	return success, nil
}

// UpdateSavedItemStatus is Inboxt's updateSavedItemStatus: it answers Void
// where Hearth's updateSavedItemsStatus answers the items. An unknown id is
// NOT_FOUND and changes nothing (Inboxt's updateStatus throws "Item not
// found" too, saved-item.service.ts @ 45f4314, though after updating the
// ids before it).
func (r *mutationResolver) UpdateSavedItemStatus(ctx context.Context, in generated.UpdateSavedItemStatusInput) (*generated.Void, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := library.Of(r.s.store).SetItemsStatus(ctx, id, in.Ids, string(in.Status)); err != nil {
		return nil, err
	}
	return success, nil
}

// PermanentlyDeleteSavedItems, EmptyTrash, DeleteLabel, DeleteHighlights,
// DeleteSavedQuery and DeleteAPIToken are session-only, as in Inboxt (no
// @ApiTokenAllowed on their resolvers @ 45f4314): see sessionOnly.
func (r *mutationResolver) PermanentlyDeleteSavedItems(ctx context.Context, in generated.PermanentlyDeleteSavedItemsInput) (*generated.Void, error) {
	c, err := sessionOnly(ctx)
	if err != nil {
		return nil, err
	}
	id := c.Member.ID
	if err := library.Of(r.s.store).PermanentlyDeleteItems(ctx, id, in.Ids); err != nil {
		return nil, err
	}
	return success, nil
}

// EmptyTrash answers what Inboxt's web app shows ("<count> items
// permanently deleted"): the items in the trash when it was asked, which
// are deleted unless restored meanwhile, a large trash's after the answer
// (library.Store.EmptyTrash).
func (r *mutationResolver) EmptyTrash(ctx context.Context) (*generated.EmptyTrash, error) {
	c, err := sessionOnly(ctx)
	if err != nil {
		return nil, err
	}
	id := c.Member.ID
	n, err := library.Of(r.s.store).EmptyTrash(ctx, id)
	if err != nil {
		return nil, err
	}
	return &generated.EmptyTrash{Success: true, Count: float64(n)}, nil
}

func (r *mutationResolver) CreateLabel(ctx context.Context, in generated.CreateLabelInput) (*generated.Label, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	l, err := library.Of(r.s.store).CreateLabel(ctx, id, in.Name, in.Color)
	labelsChanged(ctx)
	if err != nil {
		return nil, err
	}
	return toLabel(l), nil
}

func (r *mutationResolver) UpdateLabel(ctx context.Context, in generated.UpdateLabelInput) (*generated.Label, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	l, err := library.Of(r.s.store).UpdateLabel(ctx, id, in.ID, in.Name, in.Color)
	labelsChanged(ctx)
	if errors.Is(err, storage.ErrConflict) {
		// Inboxt's answer to a rename onto another label's name
		// (label.service.ts @ 45f4314): BAD_REQUEST, not CONFLICT.
		return nil, &userError{codeBadRequest, "Label already exists"}
	}
	if err != nil {
		return nil, err
	}
	return toLabel(l), nil
}

func (r *mutationResolver) DeleteLabel(ctx context.Context, in generated.DeleteLabelInput) (*generated.Void, error) {
	c, err := sessionOnly(ctx)
	if err != nil {
		return nil, err
	}
	id := c.Member.ID
	err = library.Of(r.s.store).DeleteLabel(ctx, id, in.ID)
	labelsChanged(ctx)
	if err != nil {
		return nil, err
	}
	return success, nil
}

func (r *mutationResolver) ReorderLabels(ctx context.Context, in generated.ReorderLabelsInput) ([]*generated.Label, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	ls, err := library.Of(r.s.store).ReorderLabels(ctx, id, in.Ids)
	labelsChanged(ctx)
	if err != nil {
		return nil, err
	}
	return toLabels(ls), nil
}

func (r *mutationResolver) CreateHighlight(ctx context.Context, in generated.CreateHighlightInput) (*generated.Highlight, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	segs := make([]library.HighlightSegment, len(in.Segments))
	for i, sg := range in.Segments {
		// Inboxt's web app sends the whole rest of the selection's text
		// node as its context (highlightsDOM.ts wrapSafeRangeWithSpan,
		// Inboxt/inboxt@45f4314), which a long paragraph takes past the
		// store's limit; the characters nearest the selection are kept, as
		// Hearth's reader sends them.
		segs[i] = library.HighlightSegment{
			XPath:       sg.Xpath,
			BeforeText:  clipFront(sg.BeforeText, library.MaxSegmentContext),
			AfterText:   articles.Clip(sg.AfterText, library.MaxSegmentContext),
			StartOffset: sg.StartOffset, EndOffset: sg.EndOffset,
		}
		if sg.Text != nil {
			segs[i].Text = *sg.Text
		}
	}
	note := ""
	if in.Note != nil {
		note = *in.Note
	}
	h, err := library.Of(r.s.store).CreateHighlight(ctx, id, in.SavedItemID, segs, note)
	if err != nil {
		return nil, err
	}
	return toHighlight(h), nil
}

// clipFront keeps the last n characters of s.
func clipFront(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[len(r)-n:])
}

func (r *mutationResolver) DeleteHighlights(ctx context.Context, in generated.DeleteHighlightsInput) (*generated.Void, error) {
	c, err := sessionOnly(ctx)
	if err != nil {
		return nil, err
	}
	id := c.Member.ID
	if len(in.Items) == 0 {
		return nil, badInput("items must not be empty")
	}
	ids := make([]string, len(in.Items))
	for i, it := range in.Items {
		ids[i] = it.ID
	}
	if err := library.Of(r.s.store).DeleteHighlights(ctx, id, ids); err != nil {
		return nil, err
	}
	return success, nil
}

func (r *mutationResolver) CreateSavedQuery(ctx context.Context, in generated.CreateSavedQueryInput) (*generated.SavedQuery, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := parseSearch(in.Query); err != nil {
		return nil, err
	}
	q, err := library.Of(r.s.store).CreateSavedQuery(ctx, id, in.Name, in.Query)
	if err != nil {
		return nil, err
	}
	return toSavedQuery(q), nil
}

func (r *mutationResolver) UpdateSavedQuery(ctx context.Context, in generated.UpdateSavedQueryInput) (*generated.SavedQuery, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := parseSearch(in.Query); err != nil {
		return nil, err
	}
	q, err := library.Of(r.s.store).UpdateSavedQuery(ctx, id, in.ID, in.Name, in.Query)
	if err != nil {
		return nil, err
	}
	return toSavedQuery(q), nil
}

func (r *mutationResolver) DeleteSavedQuery(ctx context.Context, in generated.DeleteSavedQueryInput) (*generated.Void, error) {
	c, err := sessionOnly(ctx)
	if err != nil {
		return nil, err
	}
	id := c.Member.ID
	if err := library.Of(r.s.store).DeleteSavedQuery(ctx, id, in.ID); err != nil {
		return nil, err
	}
	return success, nil
}

func (r *mutationResolver) ReorderSavedQueries(ctx context.Context, in generated.ReorderSavedQueriesInput) ([]*generated.SavedQuery, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	qs, err := library.Of(r.s.store).ReorderSavedQueries(ctx, id, in.Ids)
	if err != nil {
		return nil, err
	}
	return toSavedQueries(qs), nil
}

// apiTokenExpiries maps the schema's presets to the store's names.
var apiTokenExpiries = map[generated.APITokenExpiry]string{
	generated.APITokenExpiryOneDay:     "1d",
	generated.APITokenExpirySevenDays:  "7d",
	generated.APITokenExpiryThirtyDays: "30d",
	generated.APITokenExpiryNinetyDays: "90d",
	generated.APITokenExpiryNever:      "never",
}

// CreateAPIToken is session-only, as in Inboxt: an API token must not be
// able to mint more of itself, and neither may an OAuth access token.
func (r *mutationResolver) CreateAPIToken(ctx context.Context, in generated.CreateAPITokenInput) (*generated.CreatedAPIToken, error) {
	c, err := sessionOnly(ctx)
	if err != nil {
		return nil, err
	}
	lifetime, err := apitokens.ParseExpiry(apiTokenExpiries[in.Expiry])
	if err != nil {
		return nil, badField("expiry", "unknown expiry")
	}
	t, secret, err := r.s.createSessionToken(ctx, c.Member, in.Name, lifetime)
	if err != nil {
		return nil, err
	}
	return &generated.CreatedAPIToken{Secret: secret, Token: toAPIToken(t)}, nil
}

func (r *mutationResolver) DeleteAPIToken(ctx context.Context, in generated.DeleteAPITokenInput) (*generated.Void, error) {
	c, err := sessionOnly(ctx)
	if err != nil {
		return nil, err
	}
	id := c.Member.ID
	if err := apitokens.Of(r.s.store).Delete(ctx, id, in.ID); err != nil {
		return nil, err
	}
	return success, nil
}
