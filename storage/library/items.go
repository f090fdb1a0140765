package library

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Saving, reading, updating and deleting saved items (every write through
// writeItem and removeItem, itemwrite.go).

// SaveItem stores a new saved item, or updates the member's item with the
// same URL (moving it back to the inbox; one a pending emptying of the
// trash hides is not found: itemNamedBy), or, for a newsletter whose
// MessageID the member already has, returns that item unchanged. It reports
// whether it was created.
func (s Store) SaveItem(ctx context.Context, memberID string, in NewItem) (*SavedItem, bool, error) {
	norm, msgDigest, err := cleanNewItem(&in)
	if err != nil {
		return nil, false, err
	}
	var out *SavedItem
	created := false
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		created = false
		if msgDigest != "" {
			// The read makes a concurrent save of the same message conflict,
			// so Update retries it and it finds this one's item.
			cur, err := itemNamedBy(tx, memberID, messageIDKey(memberID, msgDigest))
			if err != nil || cur != nil {
				out = cur
				return err
			}
		}
		fetchImages, imagesPrivate := in.FetchImages, in.ImagesPrivate
		if in.finishesFetch != "" {
			private, err := takeFinishedFetch(tx, memberID, in.finishesFetch)
			if err != nil {
				return err // storage.ErrNotFound: the item is gone meanwhile, nothing saved
			}
			fetchImages, imagesPrivate = true, private
		}
		t := storage.Now()
		var old *SavedItem
		if norm != "" && in.Type == TypeArticle {
			cur, err := itemNamedBy(tx, memberID, urlKey(memberID, norm))
			if err != nil {
				return err
			}
			old = cur
		}
		it := &SavedItem{}
		if old != nil {
			c := *old
			c.LabelIDs = append([]string(nil), old.LabelIDs...)
			it = &c
			if in.finishesFetch == "" && !in.SavedAt.IsZero() {
				it.CreatedAt = in.SavedAt
			}
		} else {
			created = true
			id, err := tx.FreshID(func(id string) []byte { return itemKey(memberID, id) })
			if err != nil {
				return err
			}
			it.ID = id
			it.MemberID = memberID
			it.Type = in.Type
			it.CreatedAt = cmp.Or(in.SavedAt, t)
		}
		if old == nil || in.finishesFetch == "" { // a finished fetch keeps where the member put the item
			placeItem(it, in.Status, t)
		}
		it.UpdatedAt = t
		keep := in.queueFetch && old != nil // re-fetched: keep what it has until the fetch ends
		if !keep {
			it.Title, it.Description, it.Author, it.LeadImage = in.Title, in.Description, in.Author, in.LeadImage
			it.OriginalURL, it.SourceDomain, it.WordCount = norm, in.SourceDomain, in.WordCount
			it.FromName, it.FromAddress = in.FromName, in.FromAddress
		}
		if len(in.LabelIDs) > 0 {
			labels, err := memberLabelIDs(tx, memberID, in.LabelIDs)
			if err != nil {
				return err
			}
			for _, l := range labels {
				if !contains(it.LabelIDs, l) {
					it.LabelIDs = append(it.LabelIDs, l)
				}
			}
		}
		c := itemChange{old: old, it: it, messageID: msgDigest}
		if norm != "" && in.Type == TypeArticle {
			c.url = norm
		}
		if in.queueFetch {
			c.fetch = fetchValue(norm, in.fetchPrivate, "")
		}
		if !keep {
			c.content = &ItemContent{HTML: in.HTML, Text: in.Text}
			if fetchImages && !in.queueFetch && namesImages(in.HTML) {
				if err := queueImages(tx, &c, imagesPrivate); err != nil {
					return err
				}
			}
		}
		out = it
		return writeItem(tx, c)
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// takeFinishedFetch removes the pending fetch of the member's item id that
// a save finishes, counts it done for the import that queued it, and
// reports whether the item's images may come from private addresses.
// storage.ErrNotFound: the item is gone, or a pending emptying of the
// trash is to delete it.
func takeFinishedFetch(tx *storage.Tx, memberID, id string) (private bool, err error) {
	v, err := tx.Get(fetchKey(memberID, id))
	if err != nil {
		return false, err
	}
	e := parseFetchEntry(string(v))
	if err := tx.Delete(fetchKey(memberID, id)); err != nil {
		return false, err
	}
	var pending SavedItem
	if err := getClientItem(tx, memberID, id, &pending); err != nil {
		return false, err // gone, or to go with a pending emptying (whose URL would not find it: itemNamedBy)
	}
	if e.importJob != "" {
		if err := fetchDone(tx, memberID, e.importJob, e.url, ""); err != nil {
			return false, err
		}
	}
	return e.private, nil
}

// queueImages gives the item of c an images entry in the fetch queue,
// unless a page fetch is pending for it (saved again meanwhile): that one
// brings the content again, and then its images.
func queueImages(tx *storage.Tx, c *itemChange, private bool) error {
	if c.old != nil {
		v, err := tx.Get(fetchKey(c.it.MemberID, c.it.ID))
		if err == nil && !parseFetchEntry(string(v)).images {
			return nil
		}
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
	}
	c.fetch = imagesValue(c.it.OriginalURL, private)
	return nil
}

// cleanNewItem checks and trims in, and returns its normalised URL and
// the digest of its Message-ID ("" for none).
func cleanNewItem(in *NewItem) (norm, msgDigest string, err error) {
	if in.Type == "" {
		in.Type = TypeArticle
	}
	if in.Type != TypeArticle && in.Type != TypeNewsletter {
		return "", "", storage.Invalid("unknown item type")
	}
	if in.MessageID != "" && in.Type != TypeNewsletter {
		return "", "", storage.Invalid("only newsletters have a message id")
	}
	if len(in.MessageID) > MaxMessageIDLen {
		return "", "", storage.Invalid("the message id must be at most %d bytes", MaxMessageIDLen)
	}
	if in.MessageID != "" {
		msgDigest = messageIDDigest(in.MessageID)
	}
	if in.URL != "" || in.Type == TypeArticle {
		if norm, err = NormalizeURL(in.URL); err != nil {
			return "", "", err
		}
	}
	if in.Title, err = storage.CleanLine(in.Title, MaxTitleLen, "title"); err != nil {
		return "", "", err
	}
	if in.Description, err = storage.CleanLine(in.Description, MaxDescriptionLen, "description"); err != nil {
		return "", "", err
	}
	if in.Author, err = storage.CleanLine(in.Author, MaxAuthorLen, "author"); err != nil {
		return "", "", err
	}
	if len(in.LeadImage) > MaxURLLen {
		in.LeadImage = ""
	}
	if len(in.HTML)+len(in.Text) > MaxContentLen {
		return "", "", storage.Invalid("content must be at most %d bytes", MaxContentLen)
	}
	if len(in.LabelIDs) > MaxBatchIDs {
		return "", "", storage.Invalid("too many labels")
	}
	if in.Status == "" {
		in.Status = StatusActive
	}
	if _, ok := statusCode[in.Status]; !ok {
		return "", "", storage.Invalid("unknown status")
	}
	if !in.SavedAt.IsZero() { // zero: no date asked for
		if in.SavedAt, err = CheckSavedAt(in.SavedAt); err != nil {
			return "", "", err
		}
	}
	if in.Title == "" {
		if norm != "" {
			in.Title = norm
		} else {
			in.Title = "Untitled"
		}
	}
	if in.SourceDomain == "" && norm != "" {
		in.SourceDomain = SourceDomain(norm)
	}
	return norm, msgDigest, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// SavedItem returns one of the member's items (storage.ErrNotFound for one
// a pending emptying of the trash is to delete: the member was told it is).
func (s Store) SavedItem(ctx context.Context, memberID, id string) (*SavedItem, error) {
	var it SavedItem
	err := s.st.View(ctx, func(tx *storage.Tx) error { return getClientItem(tx, memberID, id, &it) })
	if err != nil {
		return nil, err
	}
	return &it, nil
}

// SavedItems returns the member's items with ids, in that order, skipping
// unknown ids and the items a pending emptying of the trash is to delete.
func (s Store) SavedItems(ctx context.Context, memberID string, ids []string) ([]*SavedItem, error) {
	var out []*SavedItem
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		var cut *emptyingCut // read at the first item of the trash
		return eachItem(tx, memberID, ids, func(it *SavedItem) error {
			if it.Status == StatusDeleted && cut == nil {
				c, err := readEmptyingCut(tx, memberID)
				if err != nil {
					return err
				}
				cut = &c
			}
			if cut == nil || !cut.hides(it) {
				out = append(out, it)
			}
			return nil
		})
	})
	return out, err
}

// ItemContent returns the content of a saved item.
func (s Store) ItemContent(ctx context.Context, memberID, id string) (*ItemContent, error) {
	var c ItemContent
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		return contentOrNone(tx, memberID, id, tx.GetJSON(contentKey(memberID, id), &c))
	})
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// contentOrNone is err, the error of reading the content record of the
// member's item id, or nil when there is none but the item is there (a
// new item saved without content has no content record: writeItem).
func contentOrNone(tx *storage.Tx, memberID, id string, err error) error {
	if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if ok, herr := tx.Has(itemKey(memberID, id)); herr != nil || !ok {
		return cmp.Or(herr, err)
	}
	return nil
}

// updateItems applies fn to each of the member's items with ids (all must
// exist, and none be one a pending emptying of the trash is to delete:
// storage.ErrNotFound, so that it is not restored), moving updatedAt, and returns them. It is one transaction unless
// the items are too big for one (see UpdateInParts). fn only reads through
// tx: it also runs in the read transaction that checks the items.
func (s Store) updateItems(ctx context.Context, memberID string, ids []string, fn func(tx *storage.Tx, it *SavedItem) error) ([]*SavedItem, error) {
	if len(ids) == 0 {
		return nil, storage.Invalid("ids must not be empty")
	}
	if len(ids) > MaxBatchIDs {
		return nil, storage.Invalid("at most %d ids at once", MaxBatchIDs)
	}
	seen := map[string]bool{}
	var unique []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			unique = append(unique, id)
		}
	}
	t := storage.Now()
	changed := make(map[string]*SavedItem, len(unique)) // by the last attempt
	// Before the first of several parts, every item exists and fn accepts
	// it (a label change can refuse one item): else the parts before a
	// refusal would stay.
	check := func(tx *storage.Tx, ids []string) error {
		for _, id := range ids {
			var it SavedItem
			if err := getClientItem(tx, memberID, id, &it); err != nil {
				return err
			}
			if err := fn(tx, &it); err != nil {
				return err
			}
		}
		return nil
	}
	err := s.st.UpdateInParts(ctx, unique, check, func(tx *storage.Tx, ids []string) error {
		for _, id := range ids {
			var old SavedItem
			if err := getClientItem(tx, memberID, id, &old); err != nil {
				return err
			}
			it := old
			it.LabelIDs = append([]string(nil), old.LabelIDs...)
			if err := fn(tx, &it); err != nil {
				return err
			}
			if err := updateItem(tx, &old, &it, t); err != nil {
				return err
			}
			changed[id] = &it
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*SavedItem, len(unique))
	for i, id := range unique {
		out[i] = changed[id]
	}
	return out, nil
}

// SetItemsStatus moves items to the inbox (ACTIVE), archive or trash.
func (s Store) SetItemsStatus(ctx context.Context, memberID string, ids []string, status string) ([]*SavedItem, error) {
	if _, ok := statusCode[status]; !ok {
		return nil, storage.Invalid("unknown status")
	}
	return s.updateItems(ctx, memberID, ids, func(_ *storage.Tx, it *SavedItem) error {
		placeItem(it, status, storage.Now())
		return nil
	})
}

// placeItem puts it in status at t: an item moved to the trash is deleted
// then, one anywhere else is not deleted.
func placeItem(it *SavedItem, status string, t time.Time) {
	it.Status = status
	if status == StatusDeleted {
		it.DeletedAt = &t
	} else {
		it.DeletedAt = nil
	}
}

// ItemMetadata is a partial update of an item's descriptive fields.
type ItemMetadata struct {
	Title, Description, Author *string
}

// UpdateItemMetadata changes an item's title, description or author.
func (s Store) UpdateItemMetadata(ctx context.Context, memberID, id string, m ItemMetadata) (*SavedItem, error) {
	var err error
	if m.Title != nil {
		v := *m.Title
		if v, err = storage.CleanLine(v, MaxTitleLen, "title"); err != nil {
			return nil, err
		}
		if v == "" {
			return nil, storage.Invalid("title must not be empty")
		}
		m.Title = &v
	}
	if m.Description != nil {
		v := *m.Description
		if v, err = storage.CleanLine(v, MaxDescriptionLen, "description"); err != nil {
			return nil, err
		}
		m.Description = &v
	}
	if m.Author != nil {
		v := *m.Author
		if v, err = storage.CleanLine(v, MaxAuthorLen, "author"); err != nil {
			return nil, err
		}
		m.Author = &v
	}
	items, err := s.updateItems(ctx, memberID, []string{id}, func(_ *storage.Tx, it *SavedItem) error {
		if m.Title != nil {
			it.Title = *m.Title
		}
		if m.Description != nil {
			it.Description = *m.Description
		}
		if m.Author != nil {
			it.Author = *m.Author
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return items[0], nil
}

// SetItemsRead marks items read (now) or unread, as the member's choice.
func (s Store) SetItemsRead(ctx context.Context, memberID string, ids []string, read bool) ([]*SavedItem, error) {
	return s.updateItems(ctx, memberID, ids, func(_ *storage.Tx, it *SavedItem) error {
		it.IsReadManual = true
		if read {
			t := storage.Now()
			it.ReadAt = &t
		} else {
			it.ReadAt = nil
		}
		return nil
	})
}

// UpdateReadingProgress records how far (0 to 100 percent) the member has
// read; reaching 100 marks the item read unless it was marked by hand.
func (s Store) UpdateReadingProgress(ctx context.Context, memberID, id string, progress float64) (*SavedItem, error) {
	if math.IsNaN(progress) || progress < 0 || progress > 100 {
		return nil, storage.Invalid("progress must be between 0 and 100")
	}
	items, err := s.updateItems(ctx, memberID, []string{id}, func(_ *storage.Tx, it *SavedItem) error {
		it.ReadingProgress = progress
		if progress >= 100 && it.ReadAt == nil && !it.IsReadManual {
			t := storage.Now()
			it.ReadAt = &t
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return items[0], nil
}

// LabelChange describes setSavedItemLabels: Set replaces the labels when not
// nil; Add and Remove adjust them. SkipUnknown skips label ids the member
// does not have instead of failing, as Inboxt's setManyLabels does
// (saved-item.service.ts @ 45f4314).
type LabelChange struct {
	Set         *[]string
	Add, Remove []string
	SkipUnknown bool
}

// SetItemLabels changes the labels of items. A label id the change adds or
// sets that the member does not have is storage.ErrNotFound; ids of labels that no
// longer exist, left on an item by a label deletion that stopped half-way
// (see labelBatch), are dropped from it.
//
// Each of the change's lists may name at most MaxBatchIDs labels (a member
// has at most MaxLabels), refused before any item is read: the lists come
// from a request, and every item of the change is compared with them.
func (s Store) SetItemLabels(ctx context.Context, memberID string, ids []string, c LabelChange) ([]*SavedItem, error) {
	if c.Set != nil && len(*c.Set) > MaxBatchIDs || len(c.Add) > MaxBatchIDs || len(c.Remove) > MaxBatchIDs {
		return nil, storage.Invalid("a label change may name at most %d labels to set, add or remove", MaxBatchIDs)
	}
	var requested []string
	if c.Set != nil {
		requested = append(requested, (*c.Set)...)
	}
	requested = append(requested, c.Add...)
	removed := make(map[string]bool, len(c.Remove))
	for _, l := range c.Remove {
		removed[l] = true
	}
	return s.updateItems(ctx, memberID, ids, func(tx *storage.Tx, it *SavedItem) error {
		want := it.LabelIDs
		if c.Set != nil {
			want = *c.Set
		}
		seen := make(map[string]bool, len(want)+len(c.Add))
		var next []string
		for _, list := range [][]string{want, c.Add} {
			for _, l := range list {
				if !seen[l] && !removed[l] {
					seen[l] = true
					next = append(next, l)
				}
			}
		}
		if len(next) > MaxBatchIDs {
			return storage.Invalid("too many labels")
		}
		valid, err := memberLabelIDs(tx, memberID, next)
		if err != nil {
			return err
		}
		if !c.SkipUnknown && len(valid) < len(next) {
			known := make(map[string]bool, len(valid))
			for _, l := range valid {
				known[l] = true
			}
			for _, l := range requested {
				if !known[l] && !removed[l] {
					return storage.ErrNotFound
				}
			}
		}
		next = valid
		it.LabelIDs = next
		return nil
	})
}

// PermanentlyDeleteItems removes items that are in the trash. An id that is
// unknown or not in the trash is storage.ErrNotFound and nothing is deleted.
// An item with more highlights than its removal's transaction holds has
// them deleted first (dropManyHighlights): cut short, it stays in the
// trash with the rest, and the call again removes it.
func (s Store) PermanentlyDeleteItems(ctx context.Context, memberID string, ids []string) error {
	if len(ids) == 0 || len(ids) > MaxBatchIDs {
		return storage.Invalid("ids must hold 1 to %d ids", MaxBatchIDs)
	}
	// Each item in turn: checked, and deleted unless only checking.
	each := func(del bool) func(tx *storage.Tx, ids []string) error {
		return func(tx *storage.Tx, ids []string) error {
			for _, id := range ids {
				var it SavedItem
				err := getItem(tx, itemKey(memberID, id), &it)
				if errors.Is(err, storage.ErrNotFound) {
					continue // already gone: deleting is idempotent
				}
				if err != nil {
					return err
				}
				if it.Status != StatusDeleted {
					return storage.Invalid("item %s is not in the trash; move it to the trash first", id)
				}
				if del {
					if err := removeItem(tx, &it); err != nil {
						return err
					}
				}
			}
			return nil
		}
	}
	// Checked first, so that an id refused leaves every item whole; then
	// the highlights of an item with too many to remove with it.
	if err := s.st.View(ctx, func(tx *storage.Tx) error { return each(false)(tx, ids) }); err != nil {
		return err
	}
	if err := s.dropManyHighlights(ctx, memberID, ids); err != nil {
		return err
	}
	return s.st.UpdateInParts(ctx, ids, each(false), each(true))
}

// touchItems moves updatedAt of the member's items with ids (used when a
// label they carry changes).
func touchItems(tx *storage.Tx, memberID string, ids []string, fn func(it *SavedItem)) error {
	t := storage.Now()
	return eachItem(tx, memberID, ids, func(old *SavedItem) error {
		it := *old
		it.LabelIDs = append([]string(nil), old.LabelIDs...)
		if fn != nil {
			fn(&it)
		}
		return updateItem(tx, old, &it, t)
	})
}

// ForEachSavedItem calls fn for every item of the member with its content,
// newest first, from one consistent snapshot (for exports), but those a
// pending emptying of the trash is to delete.
func (s Store) ForEachSavedItem(ctx context.Context, memberID string, fn func(it *SavedItem, c *ItemContent) error) error {
	return s.st.View(ctx, func(tx *storage.Tx) error {
		cut, err := readEmptyingCut(tx, memberID)
		if err != nil {
			return err
		}
		for _, st := range []string{StatusActive, StatusArchived, StatusDeleted} {
			prefix := itemIndexPrefix(memberID, st, SortCreatedAt)
			err := tx.Scan(prefix, nil, true, true, func(k, _ []byte) (bool, error) {
				id := strconv.FormatUint(binary.BigEndian.Uint64(k[len(k)-8:]), 10)
				var it SavedItem
				if err := getItem(tx, itemKey(memberID, id), &it); err != nil {
					if errors.Is(err, storage.ErrNotFound) {
						return true, nil
					}
					return false, err
				}
				if cut.hides(&it) {
					return true, nil // deleted, for the member
				}
				var c ItemContent
				if err := tx.GetJSON(contentKey(memberID, id), &c); err != nil && !errors.Is(err, storage.ErrNotFound) {
					return false, err
				}
				return true, fn(&it, &c)
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// RestoreItemsStatus moves each item back to the status it had (status, by
// id: ACTIVE or ARCHIVED; an undone trash), all in one change: an item the
// member does not have refuses it all, and a store that stops taking writes
// midway leaves none moved rather than some (updateItems: one transaction
// for up to MaxBatchIDs items unless Badger finds it too big).
func (s Store) RestoreItemsStatus(ctx context.Context, memberID string, status map[string]string) ([]*SavedItem, error) {
	ids := make([]string, 0, len(status))
	for id, st := range status {
		if st != StatusActive && st != StatusArchived {
			return nil, storage.Invalid("an item can be restored to the inbox or the archive only")
		}
		ids = append(ids, id)
	}
	t := storage.Now()
	return s.updateItems(ctx, memberID, ids, func(_ *storage.Tx, it *SavedItem) error {
		placeItem(it, status[it.ID], t)
		return nil
	})
}
