package library

import (
	"context"
	"errors"
	"strings"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Background fetches of addArticleFromUrl. The item is saved at once (a
// placeholder, or the member's item with that URL, its content unchanged)
// in the place and at the date the save gives (QueueFetch), together with
// a pending-fetch entry, in one transaction; the fetch finishes by saving
// the article and dropping the entry in another (FinishFetch), or by
// marking the item failed (FailFetch). Entries left by a process that
// stopped mid-fetch are found again by PendingFetches on the next start.
//
//	fetch/<member id>/<item id>   the URL to fetch, after "private " when it
//	                              may be fetched from private addresses and
//	                              then "import " when an import queued it,
//	                              or "images " when the page is saved and
//	                              only its images are to be fetched
//	                              (outside u/<member>/, so that one scan
//	                              finds every member's)

func fetchKey(memberID, itemID string) []byte { return storage.Key("fetch", memberID, itemID) }

func init() {
	// A member's pending fetches go with the member (a member has few).
	members.OnDelete(func(tx *storage.Tx, memberID string) error {
		return tx.DeletePrefix(storage.Key("fetch", memberID, ""))
	})
}

// PendingFetch is an item whose page is still to be fetched. Private is
// set when it was queued by a server that may fetch private addresses: only
// such a server fetches it, and a stricter one never does.
// Import is set for the items of an import: fetched politely (one at a
// time per host) and, when the fetch fails, keeping the title they came with.
// Images is set when the item's content is saved and only the images it
// names are to be fetched (see images.go).
type PendingFetch struct {
	MemberID, ItemID, URL string
	Private               bool
	Import                bool
	Images                bool
}

const (
	privateFetch = "private "
	importFetch  = "import "
	imagesFetch  = "images "
)

// fetchEntry is a pending-fetch entry's value, read.
type fetchEntry struct {
	url       string
	private   bool
	importJob string
	images    bool
}

// parseFetchEntry reads a pending-fetch entry's value: [private ][import
// <job id> |images ]<url>.
func parseFetchEntry(v string) fetchEntry {
	var e fetchEntry
	e.url, e.private = strings.CutPrefix(v, privateFetch)
	if rest, ok := strings.CutPrefix(e.url, importFetch); ok {
		e.importJob, e.url, _ = strings.Cut(rest, " ")
	} else {
		e.url, e.images = strings.CutPrefix(e.url, imagesFetch)
	}
	return e
}

// pending is the entry as a PendingFetch of the member's item.
func (e fetchEntry) pending(memberID, itemID string) PendingFetch {
	return PendingFetch{MemberID: memberID, ItemID: itemID, URL: e.url, Private: e.private, Import: e.importJob != "", Images: e.images}
}

// fetchValue is the value of a pending fetch; importJob names the import
// that queued it ("" for addArticleFromUrl).
func fetchValue(url string, private bool, importJob string) []byte {
	if importJob != "" {
		url = importFetch + importJob + " " + url
	}
	if private {
		url = privateFetch + url
	}
	return []byte(url)
}

// imagesValue is the value of an images entry: fetch the images the saved
// content of the item (at url, "" for a newsletter) names.
func imagesValue(url string, private bool) []byte {
	v := imagesFetch + url
	if private {
		v = privateFetch + v
	}
	return []byte(v)
}

// fetchDone counts a finished fetch of an import's item in its job: fetched,
// or failed with the reason (listed among the job's failures). A job gone
// meanwhile is fine.
func fetchDone(tx *storage.Tx, memberID, jobID, url, reason string) error {
	var j ImportJob
	if err := tx.GetJSON(importJobKey(memberID, jobID), &j); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		return err
	}
	// UpdatedAt moves with the fetches, so that a reader of the job can
	// tell fetches that go on from fetches that stalled.
	j.UpdatedAt = storage.Now()
	if reason == "" {
		j.Fetched++
	} else {
		j.FetchFailed++
		if len(j.Failures) < MaxImportFailures {
			j.Failures = append(j.Failures, ImportFailure{Ref: url, Reason: clipRunes(reason, 500)})
		}
	}
	return tx.PutJSON(importJobKey(memberID, jobID), &j, 0)
}

// PendingFetches returns up to limit pending fetches, in key order: those
// with Private as given, or all when all is set.
func (s Store) PendingFetches(ctx context.Context, limit int, private, all bool) ([]PendingFetch, error) {
	return s.PendingFetchesWhere(ctx, limit, func(p PendingFetch) bool { return all || p.Private == private })
}

// PendingFetchesWhere returns up to limit pending fetches that keep
// accepts, in key order.
func (s Store) PendingFetchesWhere(ctx context.Context, limit int, keep func(PendingFetch) bool) ([]PendingFetch, error) {
	var out []PendingFetch
	prefix := storage.Key("fetch", "")
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		return tx.Scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
			member, item, ok := strings.Cut(string(k[len(prefix):]), "/")
			if p := parseFetchEntry(string(v)).pending(member, item); ok && keep(p) {
				out = append(out, p)
			}
			return len(out) < limit, nil
		})
	})
	return out, err
}

// PendingFetchesFrom is PendingFetchesWhere for a scan in steps: it reads
// the entries after the key after (nil: from the first), at most maxRead of
// them, and stops at limit kept ones. It returns the position to resume
// from (nil once the scan reached the last entry) and how many entries it
// read, so a caller that skips many entries (an import waiting on one
// host) pays for at most maxRead entries a call.
func (s Store) PendingFetchesFrom(ctx context.Context, after []byte, limit, maxRead int, keep func(PendingFetch) bool) (out []PendingFetch, next []byte, read int, err error) {
	prefix := storage.Key("fetch", "")
	var start []byte
	if after != nil {
		start = append(append([]byte{}, after...), 0) // the next key after it
	}
	reachedEnd := true
	err = s.st.View(ctx, func(tx *storage.Tx) error {
		return tx.Scan(prefix, start, false, false, func(k, v []byte) (bool, error) {
			read++
			member, item, ok := strings.Cut(string(k[len(prefix):]), "/")
			if p := parseFetchEntry(string(v)).pending(member, item); ok && keep(p) {
				out = append(out, p)
			}
			if len(out) >= limit || read >= maxRead {
				next = append([]byte{}, k...)
				reachedEnd = false
				return false, nil
			}
			return true, nil
		})
	})
	if reachedEnd {
		next = nil
	}
	return out, next, read, err
}

// QueueFetch saves an article to be fetched in the background: a new item
// from in (a placeholder title and description), or, when the member
// already has an item with in.URL, that item with in.LabelIDs added and its
// content kept. Either way the item is where in.Status says (the inbox by
// default) at in.SavedAt (if set) from now on, and gets a pending-fetch
// entry in the same transaction, which needs to carry neither: the fetch
// that finishes it keeps the item's place (FinishFetch). private marks the
// entry for servers that may fetch private addresses.
func (s Store) QueueFetch(ctx context.Context, memberID string, in NewItem, private bool) (*SavedItem, error) {
	in.Type = TypeArticle
	in.queueFetch = true
	in.fetchPrivate = private
	it, _, err := s.SaveItem(ctx, memberID, in)
	return it, err
}

// FinishFetch saves the fetched article in (its URL the pending item's) and
// drops the item's pending-fetch entry, in one transaction; the item stays
// where it is, at its date. If the entry or
// the item is gone (the item was deleted, or another process finished it)
// nothing is saved and storage.ErrNotFound is returned; DropFetch then removes an
// entry whose item is gone.
func (s Store) FinishFetch(ctx context.Context, memberID, itemID string, in NewItem) (*SavedItem, error) {
	in.Type = TypeArticle
	in.finishesFetch = itemID
	it, _, err := s.SaveItem(ctx, memberID, in)
	return it, err
}

// FailFetch drops the item's pending-fetch entry and, if the item has no
// content yet (a placeholder), marks it failed as Inboxt does
// (saved-item-manager.service.ts createFailedItem, Inboxt/inboxt@45f4314):
// title "Failed to process: <url>", the reason as description and content.
// An item saved before keeps what it had. storage.ErrNotFound if the entry is gone.
func (s Store) FailFetch(ctx context.Context, memberID, itemID, reason string) error {
	reason = clipRunes(strings.Join(strings.Fields(reason), " "), MaxDescriptionLen)
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		v, err := tx.Get(fetchKey(memberID, itemID))
		if err != nil {
			return err
		}
		e := parseFetchEntry(string(v))
		url, job, imported := e.url, e.importJob, e.importJob != ""
		if err := tx.Delete(fetchKey(memberID, itemID)); err != nil {
			return err
		}
		if imported {
			if err := fetchDone(tx, memberID, job, url, reason); err != nil {
				return err
			}
		}
		var old SavedItem
		if err := getItem(tx, itemKey(memberID, itemID), &old); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				return nil
			}
			return err
		}
		var c ItemContent
		if err := tx.GetJSON(contentKey(memberID, itemID), &c); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		if c.HTML != "" || c.Text != "" {
			return nil
		}
		it := old
		it.LabelIDs = append([]string(nil), old.LabelIDs...)
		if !imported || it.Title == "" || it.Title == url {
			// An imported item keeps the title its export gave it.
			it.Title = clipRunes("Failed to process: "+url, MaxTitleLen)
		}
		it.Description = reason
		it.UpdatedAt = storage.Now()
		return writeItem(tx, itemChange{old: &old, it: &it, content: &ItemContent{HTML: htmlEscaper.Replace(reason), Text: reason}})
	})
}

// HasPendingFetch reports whether the item's fetch is still pending (not
// finished, failed or dropped since it was read).
func (s Store) HasPendingFetch(ctx context.Context, memberID, itemID string) (bool, error) {
	var ok bool
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		var err error
		ok, err = tx.Has(fetchKey(memberID, itemID))
		return err
	})
	return ok, err
}

// HasPendingPageFetch reports whether the item's page is still to be
// fetched (its content is not there yet); an entry that fetches only the
// images of content saved is not one.
func (s Store) HasPendingPageFetch(ctx context.Context, memberID, itemID string) (bool, error) {
	var ok bool
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		v, err := tx.Get(fetchKey(memberID, itemID))
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		ok = err == nil && !parseFetchEntry(string(v)).images
		return err
	})
	return ok, err
}

// DropFetch removes a pending-fetch entry (its item is gone).
func (s Store) DropFetch(ctx context.Context, memberID, itemID string) error {
	return s.st.Update(ctx, func(tx *storage.Tx) error { return tx.Delete(fetchKey(memberID, itemID)) })
}

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")

func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
