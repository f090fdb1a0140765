package graphql

import (
	"context"
	"errors"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/handlers/inbound"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

func (r *queryResolver) Labels(ctx context.Context) ([]*generated.Label, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	ls, err := library.Of(r.s.store).Labels(ctx, id)
	if err != nil {
		return nil, err
	}
	return toLabels(ls), nil
}

// Entries lists saved items (or highlights with type:highlight), keyset
// paginated by the sort field then id: the cursor is the position in the
// index, so adding or removing items between pages skips and repeats
// nothing, and a deep page costs what the first does. (Most entries fields
// are written by entriesFast from the same entriesPage.)
func (r *queryResolver) Entries(ctx context.Context, in generated.GetEntriesInput) (*generated.EntryConnection, error) {
	page, err := r.entriesPage(ctx, in)
	if err != nil {
		return nil, err
	}
	conn := &generated.EntryConnection{Edges: make([]*generated.EntryEdge, 0, len(page.cursors)),
		PageInfo: &generated.PageInfo{HasNextPage: page.hasNext, HasPreviousPage: page.hasPrevious}}
	for i, h := range page.highlights {
		conn.Edges = append(conn.Edges, &generated.EntryEdge{Cursor: page.cursors[i], Node: toHighlight(h)})
	}
	items, err := r.savedItems(ctx, page.items)
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		conn.Edges = append(conn.Edges, &generated.EntryEdge{Cursor: page.cursors[i], Node: it})
	}
	conn.PageInfo.StartCursor, conn.PageInfo.EndCursor = page.startCursor(), page.endCursor()
	return conn, nil
}

// entriesPage is one page of an entries query, as the store returns it:
// saved items or (with type:highlight) highlights, and their cursors.
type entriesPage struct {
	items       []*library.SavedItem
	highlights  []*library.Highlight
	cursors     []string
	hasNext     bool
	hasPrevious bool
	// next is the cursor the next page starts after (NextAfter): past
	// the last item's when a pending emptying of the trash cut the page
	// short.
	next string
}

func (p *entriesPage) startCursor() *string {
	if len(p.cursors) == 0 {
		return nil
	}
	return &p.cursors[0]
}

func (p *entriesPage) endCursor() *string {
	if p.next != "" {
		return &p.next
	}
	if len(p.cursors) == 0 {
		return nil
	}
	return &p.cursors[len(p.cursors)-1]
}

func (r *resolver) entriesPage(ctx context.Context, in generated.GetEntriesInput) (*entriesPage, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	q := ""
	if in.Q != nil {
		q = *in.Q
	}
	srch, err := parseSearch(q)
	if err != nil {
		return nil, err
	}
	order := sortOrder{Field: library.SortCreatedAt, Desc: true}
	if in.Sort != nil {
		order = sortOrder{Field: library.SortField(in.Sort.Field), Desc: in.Sort.Direction == generated.SortDirectionDesc}
	}
	if srch.Sort != nil {
		order = *srch.Sort
	}
	p := library.PageRequest{Field: order.Field, Desc: order.Desc, First: pageSize(in.First)}
	if in.After != nil {
		p.After = *in.After
	}
	out := &entriesPage{hasPrevious: p.After != ""}
	if srch.Highlights {
		page, err := library.Of(r.s.store).HighlightsPage(ctx, id, srch.Filter, p)
		if err != nil {
			return nil, err
		}
		out.highlights, out.cursors, out.hasNext, out.next = page.Highlights, page.Cursors, page.HasNext, page.NextAfter()
		return out, nil
	}
	page, err := library.Of(r.s.store).SavedItemsPage(ctx, id, srch.Filter, p)
	if err != nil {
		return nil, err
	}
	out.items, out.cursors, out.hasNext, out.next = page.Items, page.Cursors, page.HasNext, page.NextAfter()
	return out, nil
}

func (r *queryResolver) SavedItem(ctx context.Context, in generated.GetSavedItemInput) (*generated.SavedItem, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	it, err := library.Of(r.s.store).SavedItem(ctx, id, in.ID)
	if errors.Is(err, storage.ErrNotFound) {
		// Inboxt's savedItem is nullable: an unknown id is null, not an error.
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return r.savedItem(ctx, it)
}

// Me is null for a request without a token, as Inboxt's (me is public
// there: active-user.resolver.ts @ 45f4314).
func (r *queryResolver) Me(ctx context.Context) (*generated.User, error) {
	c := callerOf(ctx)
	if c == nil {
		return nil, nil
	}
	m := c.Member
	return &generated.User{
		ID:           m.ID,
		CreatedAt:    m.CreatedAt,
		Username:     m.Username,
		DisplayName:  m.DisplayName,
		EmailAddress: r.s.memberAddress(stateOf(ctx).r, m.Username),
		// Hearth sends no mail and verifies no address: answering true keeps
		// Inboxt's web app from asking for a verification it cannot get and
		// from counting down to a deletion Hearth never carries out.
		IsEmailVerified: true,
	}, nil
}

func (r *queryResolver) SavedQueries(ctx context.Context) ([]*generated.SavedQuery, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	qs, err := library.Of(r.s.store).SavedQueries(ctx, id)
	if err != nil {
		return nil, err
	}
	return toSavedQueries(qs), nil
}

func (r *queryResolver) APITokens(ctx context.Context) ([]*generated.APIToken, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := apitokens.Of(r.s.store).List(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]*generated.APIToken, len(ts))
	for i, t := range ts {
		out[i] = toAPIToken(t)
	}
	return out, nil
}

// InboundEmailAddresses is Inboxt's list of newsletter addresses: Hearth's
// one inbound URL, if the member made one. Its secret is kept only as a
// digest, so the URL is shown without it, except to the browser that just
// made it (revealedInbound); the settings page shows it once.
func (r *queryResolver) InboundEmailAddresses(ctx context.Context) ([]*generated.InboundEmailAddress, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	in, err := apitokens.Of(r.s.store).InboundInfo(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return []*generated.InboundEmailAddress{}, nil
	}
	if err != nil {
		return nil, err
	}
	full := in.Site + inbound.Path + apitokens.InboundPrefix + "…"
	if secret := revealedInbound(stateOf(ctx).r, in); secret != "" {
		full = in.Site + inbound.Path + secret
	}
	if addr := r.s.inbound.MailAddress(in.ID); addr != "" {
		full = addr // the mail webhook's recipient
	}
	return []*generated.InboundEmailAddress{{
		ID:          in.ID,
		CreatedAt:   in.CreatedAt,
		FullAddress: full,
	}}, nil
}

// readingStats computes the member's reading statistics from the items in
// the inbox and the archive (read means readAt is set), at 200 words a
// minute: from the counts the library keeps, or, for a store that has
// none yet (written by an earlier version, being counted), from the
// items themselves.
func (s *Server) readingStats(ctx context.Context, memberID string) (*generated.UserStats, error) {
	now := s.opts.Now()
	week, month := now.AddDate(0, 0, -7), now.AddDate(0, -1, 0)
	c, ok, err := library.Of(s.store).ReadingCounts(ctx, memberID, week, month)
	if err == nil && !ok {
		c, err = s.countReading(ctx, memberID, week, month)
	}
	if err != nil {
		return nil, err
	}
	st := generated.UserStats{
		ItemsReadCountAllTime: float64(c.Read),
		ItemsReadCountWeek:    float64(c.ReadAfter[0]),
		ItemsReadCountMonth:   float64(c.ReadAfter[1]),
		WordsReadCount:        float64(c.ReadWords),
		ReadCount:             float64(c.Read),
		UnreadCount:           float64(c.Items - c.Read),
	}
	st.EstimatedReadingTimeCompleted = float64(int(st.WordsReadCount+199) / 200)
	if c.Items > 0 {
		st.AverageArticleLength = float64(int(float64(c.Words)/float64(c.Items) + 0.5))
	}
	return &st, nil
}

// countReading counts what library.ReadingCounts keeps from the member's
// items in the inbox and the archive, page by page.
func (s *Server) countReading(ctx context.Context, memberID string, after ...time.Time) (library.ReadingCounts, error) {
	c := library.ReadingCounts{ReadAfter: make([]int64, len(after))}
	for _, status := range []string{library.StatusActive, library.StatusArchived} {
		p := library.PageRequest{Field: library.SortCreatedAt, First: 500}
		for {
			s.statsPages.Add(1)
			page, err := library.Of(s.store).SavedItemsPage(ctx, memberID, library.ItemFilter{Status: status}, p)
			if err != nil {
				return c, err
			}
			for _, it := range page.Items {
				c.Items++
				c.Words += int64(it.WordCount)
				if it.ReadAt == nil {
					continue
				}
				c.Read++
				c.ReadWords += int64(it.WordCount)
				for i, t := range after {
					if it.ReadAt.After(t) {
						c.ReadAfter[i]++
					}
				}
			}
			if p.After = page.NextAfter(); p.After == "" {
				break
			}
		}
	}
	return c, nil
}
