package library

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Imports of other services' exports (handlers/importer) into a job's
// member's saved items (importjobs.go keeps the jobs). Each batch of items
// is written in one transaction together with the job's new position and
// counts, so after a crash (kill -9 included) the job goes on from the
// first entry not written, and no entry is taken twice.
//
//	u/<member>/gql/impkey/<sha256>  item id: an imported item without a URL
//	                                (a newsletter), recognised when the same
//	                                file is imported again

func importKeyKey(memberID, digest string) []byte {
	return storage.Key("u", memberID, "gql", "impkey", digest)
}

// ImportItem is an item as an import brings it.
type ImportItem struct {
	Type                                       string // TypeArticle (default) or TypeNewsletter
	URL, Title, Description, Author, LeadImage string
	CreatedAt, UpdatedAt                       time.Time // zero: now; UpdatedAt zero: CreatedAt
	ReadAt                                     *time.Time
	Status                                     string // default StatusActive
	ReadingProgress                            float64
	WordCount                                  int
	Labels                                     []string // names: matched case-insensitively, created as needed
	Highlights                                 []ImportHighlight
	HTML, Text                                 string // sanitised by the caller
	// Fetch queues a fetch of the page, for an item the export gives no
	// content (a new item only).
	Fetch bool
	// ByTitle, with no URL: the export names the item by its title only
	// (Readwise's highlights), so the member's item of that exact title
	// (case aside) gets the labels and highlights; none is a failure.
	ByTitle bool
	// Images is how many images the export carries for the item: the
	// caller stores them once the item's batch is written (StoreItemImage,
	// the item found by ImportedItemID), and the job records from which
	// entry on they may still be missing (ImportJob.ImagesFrom).
	Images int
}

// ImportHighlight is a highlight of an imported item.
type ImportHighlight struct {
	Segments             []HighlightSegment
	Note                 string
	CreatedAt, UpdatedAt time.Time
}

// ImportEntry is one entry of an import file: an item, or the reason it
// was skipped. Pos is its place (1-based) in the file.
type ImportEntry struct {
	Pos     int
	Ref     string
	Item    *ImportItem
	Failure string
}

// ImportLabel is a label an import may create, with the color the export
// gave it (default: DefaultImportLabelColor).
const DefaultImportLabelColor = "#7c8594"

// ImportItems writes entries (in file order, after job's position) and
// the job's new position and counts in one transaction, or, when that is
// more than Badger takes at once, in consecutive parts, each with the job
// position of its last entry. An item whose URL the member has is not
// saved again: it only gets the labels and highlights it lacks. An entry the store
// refuses (a bad URL, a title too long) is counted as failed with the
// reason. colors names the export's label colors; rate (entries a second)
// is kept for the estimate of the time left. It returns the job as
// written last.
//
// The commits are asynchronous (storage.UpdateAsync): they survive a crash
// of the process at once and reach the disk with the next synchronous
// commit or within 200 ms, so an import does not wait for one flush of the
// logs a batch. Nothing is acknowledged before the job ends, and the
// writer of its end (UpdateImportJob) commits synchronously, which brings
// every batch before it to the disk; a power loss before then loses at most
// the last batches with the position that counts them, and the job goes on
// from the position that reached the disk (its items are found again by
// URL).
func (s Store) ImportItems(ctx context.Context, memberID, jobID string, entries []ImportEntry, colors map[string]string, rate float64) (*ImportJob, error) {
	var out *ImportJob
	lim := s.state().opts.highlightLimits()
	var apply func(part []ImportEntry) error
	apply = func(part []ImportEntry) error {
		err := s.st.UpdateAsync(ctx, func(tx *storage.Tx) error {
			var j ImportJob
			if err := tx.GetJSON(importJobKey(memberID, jobID), &j); err != nil {
				return err
			}
			if j.Finished() {
				return storage.Invalid("the import has ended")
			}
			labels := map[string]string{} // folded name -> id
			known := importedHighlights{}
			for _, e := range part {
				if e.Pos <= j.Position {
					continue // written before a restart
				}
				j.Position = e.Pos
				if e.Item != nil && e.Item.Images > 0 && j.ImagesFrom == 0 {
					j.ImagesFrom = e.Pos
				}
				reason := e.Failure
				if reason == "" && e.Item != nil {
					outcome, cut, err := importItem(tx, memberID, &j, e.Item, labels, colors, known, lim)
					if err != nil {
						var ie *storage.InvalidError
						if !errors.As(err, &ie) {
							return err
						}
						reason = ie.Msg
					} else {
						switch outcome {
						case importCreated:
							j.Created++
						case importFetching:
							j.Created++
							j.Fetching++
						case importExisting:
							j.Existing++
						}
						if cut > 0 {
							// The item is imported, short of the highlights
							// its item has no room for: listed, not failed.
							j.HighlightsCut++
							if len(j.Failures) < MaxImportFailures {
								j.Failures = append(j.Failures, ImportFailure{Ref: e.Ref, Reason: fmt.Sprintf(
									"%d of its highlights were not imported: %s", cut, lim)})
							}
						}
					}
				}
				if reason != "" {
					j.Failed++
					if len(j.Failures) < MaxImportFailures {
						j.Failures = append(j.Failures, ImportFailure{Ref: e.Ref, Reason: clipRunes(reason, 500)})
					}
				}
			}
			if j.State == ImportQueued {
				j.State = ImportRunning
			}
			if rate > 0 {
				j.ItemsPerSecond = rate
			}
			j.UpdatedAt = storage.Now()
			out = &j
			return tx.PutJSON(importJobKey(memberID, jobID), &j, 0)
		})
		if errors.Is(err, kv.ErrTooBig) && len(part) > 1 {
			half := len(part) / 2
			if err := apply(part[:half]); err != nil {
				return err
			}
			return apply(part[half:])
		}
		if errors.Is(err, kv.ErrTooBig) && len(part) == 1 && part[0].Failure == "" {
			// One item (its highlights) is more than a transaction takes:
			// it fails alone, and the job goes on past it.
			e := part[0]
			e.Item, e.Failure = nil, "the item and its highlights are more than the store takes at once"
			return apply([]ImportEntry{e})
		}
		return err
	}
	if err := apply(entries); err != nil {
		return nil, err
	}
	return out, nil
}

type importOutcome int

const (
	importCreated importOutcome = iota
	importFetching
	importExisting
)

// cleanImportItem checks and trims in as SaveItem does.
func cleanImportItem(in *ImportItem) (norm string, err error) {
	if in.Type == "" {
		in.Type = TypeArticle
	}
	if in.Type != TypeArticle && in.Type != TypeNewsletter {
		return "", storage.Invalid("unknown item type %q", in.Type)
	}
	if in.URL != "" || in.Type == TypeArticle {
		if norm, err = NormalizeURL(in.URL); err != nil {
			return "", err
		}
	}
	if in.Title, err = storage.CleanLine(clipRunes(in.Title, MaxTitleLen), MaxTitleLen, "title"); err != nil {
		return "", err
	}
	if in.Description, err = storage.CleanLine(clipRunes(in.Description, MaxDescriptionLen), MaxDescriptionLen, "description"); err != nil {
		return "", err
	}
	if in.Author, err = storage.CleanLine(clipRunes(in.Author, MaxAuthorLen), MaxAuthorLen, "author"); err != nil {
		return "", err
	}
	if len(in.LeadImage) > MaxURLLen || !strings.HasPrefix(in.LeadImage, "http") {
		in.LeadImage = ""
	}
	if len(in.HTML)+len(in.Text) > MaxContentLen {
		return "", storage.Invalid("content must be at most %d bytes", MaxContentLen)
	}
	switch in.Status {
	case "":
		in.Status = StatusActive
	case StatusActive, StatusArchived, StatusDeleted:
	default:
		return "", storage.Invalid("unknown status %q", in.Status)
	}
	if in.ReadingProgress < 0 || in.ReadingProgress > 100 || in.ReadingProgress != in.ReadingProgress {
		in.ReadingProgress = 0
	}
	// An item's text holds fewer words than MaxContentLen bytes: a count
	// beyond is none an item can have, and the sums of the member's word
	// counts (counts.go) would not add up.
	in.WordCount = min(max(in.WordCount, 0), MaxContentLen)
	if in.Title == "" {
		if norm != "" {
			in.Title = norm
		} else {
			in.Title = "Untitled"
		}
	}
	return norm, nil
}

// importSavedAt is an imported item's saved date: the export's, or now
// when it gives none the library keeps (none, later than now, earlier than
// EarliestSavedAt), as a date saveUrl would refuse does not cost an
// import its entry.
func importSavedAt(t, now time.Time) time.Time {
	if tooEarly(t) || t.After(now) {
		return now
	}
	return t.UTC().Truncate(time.Millisecond)
}

// importReadAt is an imported item's read date: the export's, or now
// when it is later than now, or the item's saved date (saved) when it is
// earlier than EarliestSavedAt, as importSavedAt treats a saved date; a
// date no client could parse (past year 9999: a time in milliseconds read
// as seconds) is never kept, nor sent to the member's apps and exports.
func importReadAt(t, saved, now time.Time) time.Time {
	switch {
	case t.After(now):
		return now
	case tooEarly(t):
		return saved
	}
	return t.UTC().Truncate(time.Millisecond)
}

// importDigest recognises an imported item without a URL: by its type,
// title, author and the date its export gives (to the millisecond, as an
// item keeps it), not the date it was saved at, so that an item without a
// date, or with one the library does not keep (importSavedAt), is found
// again by a later import or the resumed job's images.
func importDigest(in *ImportItem) string {
	sum := sha256.Sum256([]byte(in.Type + "\x00" + in.Title + "\x00" + in.Author + "\x00" + in.CreatedAt.UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano)))
	return hex.EncodeToString(sum[:])
}

// importItem writes one entry's item: a new item, or the labels and
// highlights the member's item of the same URL (or import digest) lacks,
// within the item's highlights' limits (lim); cut is how many of the
// entry's highlights the item had no room for.
func importItem(tx *storage.Tx, memberID string, j *ImportJob, in *ImportItem, labels, colors map[string]string, known importedHighlights, lim highlightLimits) (_ importOutcome, cut int, _ error) {
	if in.URL == "" && in.ByTitle {
		u, err := urlOfTitle(tx, memberID, in.Title)
		if err != nil {
			return 0, 0, err
		}
		in.URL = u
	}
	norm, err := cleanImportItem(in)
	if err != nil {
		return 0, 0, err
	}
	hls := importHighlights(in.Highlights)
	// in keeps the export's dates: they, not the clock, make the key
	// that finds the item again (importItemKey, ImportedItemID).
	t := storage.Now()
	created, updated := importSavedAt(in.CreatedAt, t), in.UpdatedAt
	if updated.Before(created) || updated.After(t) {
		updated = created
	}
	updated = updated.UTC().Truncate(time.Millisecond)

	labelIDs, err := importLabelIDs(tx, memberID, j, in, labels, colors)
	if err != nil {
		return 0, 0, err
	}

	// The same item saved before: only what it lacks is added.
	existingKey, digest := importItemKey(memberID, norm, in)
	if found, cut, err := addToSavedItem(tx, memberID, existingKey, labelIDs, hls, known, lim); err != nil || found {
		return importExisting, cut, err
	}
	hls, cut, bytes := lim.fit(hls)

	id, err := tx.FreshID(func(id string) []byte { return itemKey(memberID, id) })
	if err != nil {
		return 0, 0, err
	}
	it := &SavedItem{
		ID: id, MemberID: memberID, Type: in.Type, Status: in.Status, Title: in.Title, OriginalURL: norm,
		Description: in.Description, Author: in.Author, LeadImage: in.LeadImage, WordCount: in.WordCount,
		ReadingProgress: in.ReadingProgress, CreatedAt: created, UpdatedAt: updated, LabelIDs: labelIDs,
		HighlightCount: len(hls), hlBytes: bytes,
	}
	if norm != "" {
		it.SourceDomain = SourceDomain(norm)
	}
	if in.ReadAt != nil {
		r := importReadAt(*in.ReadAt, created, t)
		it.ReadAt, it.IsReadManual = &r, true
	}
	if in.Status == StatusDeleted {
		d := updated
		it.DeletedAt = &d
	}
	if it.WordCount == 0 && in.Text != "" {
		it.WordCount = wordCount(in.Text)
	}
	change := itemChange{it: it, url: norm, importDigest: digest, content: &ItemContent{HTML: in.HTML, Text: in.Text}}
	if norm != "" {
		change.urlKey = existingKey
	}
	fetching := in.Fetch && norm != "" && in.HTML == "" && in.Text == ""
	if fetching {
		change.fetch = fetchValue(norm, j.FetchPrivate, j.ID)
	}
	if err := writeItem(tx, change); err != nil {
		return 0, 0, err
	}
	if err := putImportedHighlights(tx, it, hls, in.Text); err != nil {
		return 0, 0, err
	}
	if fetching {
		return importFetching, cut, nil
	}
	return importCreated, cut, nil
}

// importItemKey is the key that finds the member's item of in again: its
// normalised URL's (norm), or, without one, its import digest's (digest,
// which recognises an item without a URL).
func importItemKey(memberID, norm string, in *ImportItem) (key []byte, digest string) {
	if norm != "" {
		return urlKey(memberID, norm), ""
	}
	digest = importDigest(in)
	return importKeyKey(memberID, digest), digest
}

// ImportedItemID is the id of the member's item an import entry wrote or
// found (in as ImportItems left it, or as the export gives it when the
// job resumes: the same key, importItemKey), for what is stored with it
// after its batch (its images); storage.ErrNotFound when there is none
// (the entry failed, or the item was deleted since).
func (s Store) ImportedItemID(ctx context.Context, memberID string, in *ImportItem) (string, error) {
	if in.URL == "" && in.ByTitle {
		return "", storage.ErrNotFound
	}
	c := *in
	norm, err := cleanImportItem(&c)
	if err != nil {
		return "", storage.ErrNotFound
	}
	key, _ := importItemKey(memberID, norm, &c)
	var id string
	err = s.st.View(ctx, func(tx *storage.Tx) error {
		it, err := itemNamedBy(tx, memberID, key)
		if err == nil && it == nil {
			err = storage.ErrNotFound
		}
		if err == nil {
			id = it.ID
		}
		return err
	})
	return id, err
}

// addToSavedItem gives the member's item that key (its URL's key or its
// import digest's) names the labels and highlights it lacks, moving its
// updatedAt when it gains any (or a note joined to its note); found is
// false when the member has no such item. known is what the transaction
// has read of items' highlights (addImportedHighlights); cut is how many
// highlights the item had no room for (lim).
func addToSavedItem(tx *storage.Tx, memberID string, key []byte, labelIDs []string, hls []ImportHighlight, known importedHighlights, lim highlightLimits) (found bool, cut int, err error) {
	cur, err := itemNamedBy(tx, memberID, key)
	if err != nil || cur == nil {
		return false, 0, err
	}
	it := *cur
	it.LabelIDs = append([]string(nil), cur.LabelIDs...)
	added := false
	for _, l := range labelIDs {
		if !contains(it.LabelIDs, l) {
			it.LabelIDs = append(it.LabelIDs, l)
			added = true
		}
	}
	n, cut, joined, err := addImportedHighlights(tx, &it, hls, known, lim)
	if err != nil {
		return false, 0, err
	}
	it.HighlightCount += n
	if added || n > 0 || joined {
		if err := updateItem(tx, cur, &it, storage.Now()); err != nil {
			return false, 0, err
		}
	}
	return true, cut, nil
}

// putImportedHighlights writes the highlights of a new imported item,
// dated as the export dates them (undated: as the item).
func putImportedHighlights(tx *storage.Tx, it *SavedItem, hls []ImportHighlight, text string) error {
	for _, h := range hls {
		c, u := h.CreatedAt, h.UpdatedAt
		if c.IsZero() {
			c = it.CreatedAt
		}
		if u.Before(c) {
			u = c
		}
		if _, err := putNewHighlight(tx, it, h.Segments, h.Note, c.UTC().Truncate(time.Millisecond), u.UTC().Truncate(time.Millisecond), percentIn(text, h.Segments)); err != nil {
			return err
		}
	}
	return nil
}

// importHighlights are the highlights of an imported item that can be
// kept (a highlight that cannot does not cost the item): without
// segments, a note on the item as a whole (Store.AddNote), which needs
// its note. An item has one note: the entry's notes are joined into the
// first, as AddNote joins them.
func importHighlights(in []ImportHighlight) []ImportHighlight {
	var hls []ImportHighlight
	noteAt := -1
	for _, h := range in {
		note, err := cleanText(h.Note, MaxNoteLen, "note")
		if len(h.Segments) == 0 && note == "" || len(h.Segments) > 0 && validateSegments(h.Segments) != nil {
			err = storage.Invalid("no highlight")
		}
		if err != nil {
			continue // a highlight that cannot be kept does not cost the item
		}
		if len(h.Segments) == 0 && noteAt >= 0 {
			if first := &hls[noteAt]; !noteHolds(first.Note, note) {
				if joined, err := joinNote(first.Note, note); err == nil {
					first.Note = joined
				}
			}
			continue
		}
		if len(h.Segments) == 0 {
			noteAt = len(hls)
		}
		h.Note = note
		hls = append(hls, h)
	}
	return hls
}

// importLabelIDs are the labels of an imported item: the job's, then
// those of the item's names (created when the member lacks them).
func importLabelIDs(tx *storage.Tx, memberID string, j *ImportJob, in *ImportItem, labels, colors map[string]string) ([]string, error) {
	var labelIDs []string
	ids, err := memberLabelIDs(tx, memberID, j.LabelIDs)
	if err != nil {
		return nil, err
	}
	labelIDs = append(labelIDs, ids...)
	for _, name := range in.Labels {
		id, err := importLabel(tx, memberID, name, labels, colors)
		if err != nil {
			var ie *storage.InvalidError
			if errors.As(err, &ie) {
				continue // a name the store refuses: the item goes without it
			}
			return nil, err
		}
		if !contains(labelIDs, id) {
			labelIDs = append(labelIDs, id)
		}
	}
	return labelIDs, nil
}

// ImportLabels creates those of names (an export's list of labels, in its
// order) the member lacks, with the export's colors; names the store
// refuses are left out. Labels past MaxLabels are not created.
func (s Store) ImportLabels(ctx context.Context, memberID string, names []string, colors map[string]string) error {
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		if _, err := members.ByID(tx, memberID); err != nil {
			return err
		}
		cache := map[string]string{}
		for _, n := range names {
			if _, err := importLabel(tx, memberID, n, cache, colors); err != nil && !storage.IsInvalid(err) {
				return err
			}
		}
		return nil
	})
}

// importLabel returns the id of the member's label named name (compared as
// label names are, see labelNameFold), created with the export's color if
// it has none. cache holds the names found in this transaction.
func importLabel(tx *storage.Tx, memberID, name string, cache, colors map[string]string) (string, error) {
	// A name as the export writes it, found before in this transaction:
	// its label without checking and folding it again (the fold allocates,
	// and an export repeats its few names on every row).
	if id, ok := cache[labelAsWritten+name]; ok {
		return id, nil
	}
	id, err := importLabelFolded(tx, memberID, name, cache, colors)
	if err == nil {
		cache[labelAsWritten+name] = id
	}
	return id, err
}

// labelAsWritten begins importLabel's cache keys of names as the export
// writes them (no folded name has a NUL).
const labelAsWritten = "\x00="

func importLabelFolded(tx *storage.Tx, memberID, name string, cache, colors map[string]string) (string, error) {
	color := DefaultImportLabelColor
	if c, ok := colors[strings.TrimSpace(name)]; ok && colorRE.MatchString(c) {
		color = c
	}
	name, color, err := validateLabel(name, color)
	if err != nil {
		return "", err
	}
	fold := labelNameFold(name)
	if id, ok := cache[fold]; ok {
		return id, nil
	}
	if _, full := cache[labelsFull]; full {
		// Every label of the member is in cache: name is a new one.
		return "", storage.Invalid("at most %d labels", MaxLabels)
	}
	id, err := tx.Get(labelNameKey(memberID, name))
	if err == nil {
		if ok, err := tx.Has(labelKey(memberID, string(id))); err != nil {
			return "", err
		} else if ok {
			cache[fold] = string(id)
			return string(id), nil
		}
	} else if !errors.Is(err, storage.ErrNotFound) {
		return "", err
	}
	// Labels written before names were folded have a legacy name key.
	all, err := labels(tx, memberID)
	if err != nil {
		return "", err
	}
	for _, l := range all {
		if labelNameFold(l.Name) == fold {
			cache[fold] = l.ID
			return l.ID, nil
		}
	}
	l, err := createLabel(tx, memberID, name, color)
	if storage.IsInvalid(err) {
		// The member has MaxLabels labels: they go in cache, and the
		// transaction's further new names are refused without reading
		// them all again.
		for _, l := range all {
			cache[labelNameFold(l.Name)] = l.ID
		}
		cache[labelsFull] = ""
	}
	if err != nil {
		return "", err
	}
	cache[fold] = l.ID
	return l.ID, nil
}

// labelsFull, in importLabel's cache, says the member's labels are all
// there and no more can be made (no folded name has a NUL).
const labelsFull = "\x00full"

// urlOfTitle finds the URL of the member's active or archived item titled
// title (case and outer spaces aside) through the title index.
func urlOfTitle(tx *storage.Tx, memberID, title string) (string, error) {
	want := strings.TrimSpace(title)
	for _, st := range []string{StatusActive, StatusArchived} {
		prefix := encString(itemIndexPrefix(memberID, st, SortTitle), titleSortKey(want))
		var found string
		seen := 0
		err := tx.Scan(prefix, nil, false, true, func(k, _ []byte) (bool, error) {
			seen++
			id := strconv.FormatUint(binary.BigEndian.Uint64(k[len(k)-8:]), 10)
			var it SavedItem
			if err := getItem(tx, itemKey(memberID, id), &it); err != nil {
				if errors.Is(err, storage.ErrNotFound) {
					return true, nil
				}
				return false, err
			}
			if it.Type == TypeArticle && it.OriginalURL != "" && strings.EqualFold(strings.TrimSpace(it.Title), want) {
				found = it.OriginalURL
				return false, nil
			}
			return seen < maxTitleMatches, nil
		})
		if err != nil {
			return "", err
		}
		if found != "" {
			return found, nil
		}
	}
	return "", storage.Invalid("no article titled %q in the library (the export names it by title only: import the list with its addresses first)", clipRunes(want, 80))
}

// maxTitleMatches bounds the items of one title urlOfTitle reads.
const maxTitleMatches = 50

// wordCount is len(strings.Fields(s)), without the slice of s's words (an
// imported content's thousands).
func wordCount(s string) int {
	n, in := 0, false
	for _, r := range s {
		if unicode.IsSpace(r) {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}
