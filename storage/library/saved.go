package library

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Saved content (the GraphQL service, key prefix "gql" under the member's
// prefix). Layout, all under u/<member>/gql/:
//
//	item/<id>                      SavedItem (metadata, no content; see itemRecordV1)
//	content/<id>                   ItemContent (HTML and text)
//	url/<sha256 of normalized url> item id (saving a URL twice updates the item)
//	ix/<status>/<field>/<sort><id> the item's record again: one ordered index per status and sort field
//	li/<label id>/<item id>        empty: the items carrying a label
//	msgid/<sha256 of message id>   item id (a newsletter delivered twice is saved once)
//	msgof/<item id>                the msgid digest of that item, to drop it with the item
//
// The index keys encode the sort value in order-preserving bytes followed by
// the item id as 8 big-endian bytes, so a page is one seek plus N reads at
// any depth, and a cursor (the index key suffix) stays meaningful while items
// are added or removed. Each index entry holds a copy of the item's record
// (a covering index), so a page is read in one pass along the index instead
// of one lookup per item; writeItem (itemwrite.go) is the only writer of
// items and keeps the copies equal. Entries written before the copies have no value, and
// their item is looked up.

// Saved item statuses and types, with Inboxt's names.
const (
	StatusActive   = "ACTIVE"
	StatusArchived = "ARCHIVED"
	StatusDeleted  = "DELETED"

	TypeArticle    = "ARTICLE"
	TypeNewsletter = "NEWSLETTER"
)

// Limits on saved content.
const (
	MaxURLLen         = 2048
	MaxTitleLen       = 1000
	MaxDescriptionLen = 5000
	MaxAuthorLen      = 300
	MaxContentLen     = 8 << 20
	MaxBatchIDs       = 500
	MaxMessageIDLen   = 998 // RFC 5322's line length
)

// SavedItem is an article or newsletter saved by a member.
type SavedItem struct {
	ID              string     `json:"id"`
	MemberID        string     `json:"member_id"`
	Type            string     `json:"type"`
	Status          string     `json:"status"`
	Title           string     `json:"title"`
	OriginalURL     string     `json:"original_url,omitempty"`
	SourceDomain    string     `json:"source_domain,omitempty"`
	Description     string     `json:"description,omitempty"`
	Author          string     `json:"author,omitempty"`
	LeadImage       string     `json:"lead_image,omitempty"`
	WordCount       int        `json:"word_count"`
	ReadingProgress float64    `json:"reading_progress"`
	ReadAt          *time.Time `json:"read_at,omitempty"`
	IsReadManual    bool       `json:"is_read_manual,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	DeletedAt       *time.Time `json:"deleted_at,omitempty"`
	LabelIDs        []string   `json:"label_ids,omitempty"`
	HighlightCount  int        `json:"highlight_count,omitempty"`
	// Sender of a newsletter.
	FromName    string `json:"from_name,omitempty"`
	FromAddress string `json:"from_address,omitempty"`
}

// ItemContent is the readable content of a saved item.
type ItemContent struct {
	HTML string `json:"html"`
	Text string `json:"text"`
}

// NewItem is what SaveItem stores.
type NewItem struct {
	Type         string // TypeArticle (default) or TypeNewsletter
	URL          string // required for articles; the dedup key
	Title        string
	Description  string
	Author       string
	LeadImage    string
	SourceDomain string // default: the URL's host
	WordCount    int
	HTML, Text   string
	LabelIDs     []string
	FromName     string
	FromAddress  string
	// MessageID is the normalised Message-ID of a newsletter. Saving a
	// message whose id the member already has returns that item and
	// changes nothing (forwarding services retry); "" saves every time.
	MessageID string

	queueFetch    bool   // QueueFetch: add a pending fetch, keep an existing item's content
	fetchPrivate  bool   // QueueFetch: the fetch may reach private addresses
	finishesFetch string // FinishFetch: the item whose pending fetch this ends
}

// SortField names a sort order of saved items (Inboxt's names plus updatedAt).
type SortField string

// Sort fields.
const (
	SortCreatedAt       SortField = "createdAt"
	SortUpdatedAt       SortField = "updatedAt"
	SortTitle           SortField = "title"
	SortWordCount       SortField = "wordCount"
	SortReadingProgress SortField = "readingProgress"
)

var sortFieldCode = map[SortField]string{
	SortCreatedAt: "c", SortUpdatedAt: "u", SortTitle: "t", SortWordCount: "w", SortReadingProgress: "p",
}

// ValidSortField reports whether f is a sort field of saved items.
func ValidSortField(f SortField) bool { _, ok := sortFieldCode[f]; return ok }

var statusCode = map[string]string{StatusActive: "A", StatusArchived: "R", StatusDeleted: "D"}

func itemKey(memberID, id string) []byte { return storage.Key("u", memberID, "gql", "item", id) }
func contentKey(memberID, id string) []byte {
	return storage.Key("u", memberID, "gql", "content", id)
}
func urlKey(memberID, u string) []byte {
	sum := sha256.Sum256([]byte(u))
	return storage.Key("u", memberID, "gql", "url", hex.EncodeToString(sum[:]))
}
func messageIDDigest(messageID string) string {
	sum := sha256.Sum256([]byte(messageID))
	return hex.EncodeToString(sum[:])
}
func messageIDKey(memberID, digest string) []byte {
	return storage.Key("u", memberID, "gql", "msgid", digest)
}
func itemMessageIDKey(memberID, itemID string) []byte {
	return storage.Key("u", memberID, "gql", "msgof", itemID)
}
func itemIndexPrefix(memberID, status string, f SortField) []byte {
	return storage.Key("u", memberID, "gql", "ix", statusCode[status], sortFieldCode[f], "")
}
func labelItemKey(memberID, labelID, itemID string) []byte {
	return storage.Key("u", memberID, "gql", "li", labelID, itemID)
}

// --- order-preserving encodings ---

func encUint64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// encTime encodes t as its Unix nanoseconds. Times outside what they can
// hold (before 1678 or after 2262; a search range such as saved:*..9999-12-31
// can name one) are clamped to the first or last of them, which keeps their
// order: UnixNano itself would overflow and turn a bound around.
func encTime(b []byte, t time.Time) []byte {
	var ns int64
	switch {
	case t.Before(minEncTime):
		ns = math.MinInt64
	case t.After(maxEncTime):
		ns = math.MaxInt64
	default:
		ns = t.UnixNano()
	}
	return encUint64(b, uint64(ns)^(1<<63))
}

var (
	minEncTime = time.Unix(0, math.MinInt64)
	maxEncTime = time.Unix(0, math.MaxInt64)
)

func encFloat(b []byte, f float64) []byte {
	bits := math.Float64bits(f)
	if f >= 0 {
		bits ^= 1 << 63
	} else {
		bits = ^bits
	}
	return encUint64(b, bits)
}

func encInt(b []byte, v int64) []byte { return encUint64(b, uint64(v)^(1<<63)) }

// encString escapes 0x00 so that the encoding is prefix-free and orders like
// the string: 0x00 -> 0x00 0xFF, terminated by 0x00 0x01.
func encString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			b = append(b, 0, 0xff)
		} else {
			b = append(b, s[i])
		}
	}
	return append(b, 0, 1)
}

// titleSortKey is the case-insensitive title, cut to 128 bytes.
func titleSortKey(title string) string {
	s := strings.ToLower(strings.TrimSpace(title))
	if len(s) > 128 {
		s = s[:128]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}

func idBytes(id string) uint64 {
	n, _ := strconv.ParseUint(id, 10, 64)
	return n
}

func itemSortValue(it *SavedItem, f SortField) []byte {
	var b []byte
	switch f {
	case SortCreatedAt:
		b = encTime(b, it.CreatedAt)
	case SortUpdatedAt:
		b = encTime(b, it.UpdatedAt)
	case SortTitle:
		b = encString(b, titleSortKey(it.Title))
	case SortWordCount:
		b = encInt(b, int64(it.WordCount))
	case SortReadingProgress:
		b = encFloat(b, it.ReadingProgress)
	}
	return encUint64(b, idBytes(it.ID))
}

// --- item records ---

// itemRecordV1 opens an item record in the compact binary form that
// appendItemRecord writes. Every entries page decodes its items, and
// encoding/json was most of a page's storage cost. Records written before
// this form are JSON objects (their first byte is '{'); getItem still reads
// them, and the next write of the item converts it.
//
// After the version byte: the strings ID, MemberID, Type, Status, Title,
// OriginalURL, SourceDomain, Description, Author, LeadImage, FromName,
// FromAddress (uvarint length, bytes); WordCount and HighlightCount
// (varint); ReadingProgress (8 bytes, IEEE 754 big-endian); IsReadManual (1
// byte); CreatedAt, UpdatedAt; ReadAt and DeletedAt (1 byte present, then
// the time); LabelIDs (uvarint count, strings). A time is its Unix seconds
// (varint) and nanoseconds (uvarint), read back in UTC.
const itemRecordV1 = 0x01

func appendRecordString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendRecordTime(b []byte, t time.Time) []byte {
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

func appendRecordOptTime(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, 0)
	}
	return appendRecordTime(append(b, 1), *t)
}

func appendItemRecord(b []byte, it *SavedItem) []byte {
	b = append(b, itemRecordV1)
	for _, s := range [...]string{it.ID, it.MemberID, it.Type, it.Status, it.Title, it.OriginalURL,
		it.SourceDomain, it.Description, it.Author, it.LeadImage, it.FromName, it.FromAddress} {
		b = appendRecordString(b, s)
	}
	b = binary.AppendVarint(b, int64(it.WordCount))
	b = binary.AppendVarint(b, int64(it.HighlightCount))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(it.ReadingProgress))
	if it.IsReadManual {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendRecordTime(b, it.CreatedAt)
	b = appendRecordTime(b, it.UpdatedAt)
	b = appendRecordOptTime(b, it.ReadAt)
	b = appendRecordOptTime(b, it.DeletedAt)
	b = binary.AppendUvarint(b, uint64(len(it.LabelIDs)))
	for _, l := range it.LabelIDs {
		b = appendRecordString(b, l)
	}
	return b
}

// recordReader reads a binary record. Strings are cut from one copy of the
// record, so decoding an item allocates once for all of its strings.
type recordReader struct {
	b   []byte // the record, only valid during the read
	s   string // a copy of b
	off int
	bad bool
}

func (r *recordReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.bad, r.off = true, len(r.b)
		return 0
	}
	r.off += n
	return v
}

func (r *recordReader) varint() int64 {
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.bad, r.off = true, len(r.b)
		return 0
	}
	r.off += n
	return v
}

func (r *recordReader) byte() byte {
	if r.off >= len(r.b) {
		r.bad = true
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *recordReader) string() string {
	n := r.uvarint()
	if n > uint64(len(r.b)-r.off) {
		r.bad, r.off = true, len(r.b)
		return ""
	}
	s := r.s[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *recordReader) uint64() uint64 {
	if len(r.b)-r.off < 8 {
		r.bad, r.off = true, len(r.b)
		return 0
	}
	r.off += 8
	return binary.BigEndian.Uint64(r.b[r.off-8:])
}

func (r *recordReader) time() time.Time {
	sec := r.varint()
	nsec := r.uvarint()
	if nsec >= 1e9 {
		r.bad = true
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

func (r *recordReader) optTime() *time.Time {
	if r.byte() == 0 {
		return nil
	}
	t := r.time()
	return &t
}

var errBadItemRecord = errors.New("storage: malformed saved item record")

// parseItemRecord decodes a record of either form into it.
func parseItemRecord(b []byte, it *SavedItem) error {
	*it = SavedItem{}
	if len(b) > 0 && b[0] == '{' {
		return json.Unmarshal(b, it)
	}
	if len(b) == 0 || b[0] != itemRecordV1 {
		return errBadItemRecord
	}
	r := &recordReader{b: b, s: string(b), off: 1}
	for _, p := range [...]*string{&it.ID, &it.MemberID, &it.Type, &it.Status, &it.Title, &it.OriginalURL,
		&it.SourceDomain, &it.Description, &it.Author, &it.LeadImage, &it.FromName, &it.FromAddress} {
		*p = r.string()
	}
	it.WordCount = int(r.varint())
	it.HighlightCount = int(r.varint())
	it.ReadingProgress = math.Float64frombits(r.uint64())
	it.IsReadManual = r.byte() != 0
	it.CreatedAt = r.time()
	it.UpdatedAt = r.time()
	it.ReadAt = r.optTime()
	it.DeletedAt = r.optTime()
	if n := r.uvarint(); n > 0 && n <= uint64(len(b)) {
		it.LabelIDs = make([]string, n)
		for i := range it.LabelIDs {
			it.LabelIDs[i] = r.string()
		}
	} else if n > 0 {
		r.bad = true
	}
	if r.bad || r.off != len(b) {
		*it = SavedItem{}
		return errBadItemRecord
	}
	return nil
}

// getItem reads the record at key (an itemKey) into it, or returns
// storage.ErrNotFound.
func getItem(tx *storage.Tx, key []byte, it *SavedItem) error {
	b, err := tx.Get(key)
	if err != nil {
		return err
	}
	return parseItemRecord(b, it)
}

// NormalizeURL returns the form of an article URL used to recognise the same
// article saved twice: absolute http(s), lower-case scheme and host, no
// default port, no fragment.
func NormalizeURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > MaxURLLen {
		return "", storage.Invalid("url must be an absolute http or https URL of at most %d characters", MaxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "HTTP" && u.Scheme != "HTTPS") || u.Host == "" || u.User != nil {
		return "", storage.Invalid("url must be an absolute http or https URL without credentials")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		if strings.Contains(host, ":") {
			u.Host = "[" + host + "]:" + port
		} else {
			u.Host = host + ":" + port
		}
	} else if strings.Contains(host, ":") {
		u.Host = "[" + host + "]"
	} else {
		u.Host = host
	}
	u.Fragment, u.RawFragment = "", ""
	if u.Path == "" {
		u.Path = "/"
	}
	return u.String(), nil
}

// SourceDomain is the host of u without "www.".
func SourceDomain(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(strings.ToLower(p.Hostname()), "www.")
}

// SaveItem stores a new saved item, or updates the member's item with the
// same URL (moving it back to the inbox), or, for a newsletter whose
// MessageID the member already has, returns that item unchanged. It reports
// whether it was created.
func (s Store) SaveItem(ctx context.Context, memberID string, in NewItem) (*SavedItem, bool, error) {
	if in.Type == "" {
		in.Type = TypeArticle
	}
	if in.Type != TypeArticle && in.Type != TypeNewsletter {
		return nil, false, storage.Invalid("unknown item type")
	}
	if in.MessageID != "" && in.Type != TypeNewsletter {
		return nil, false, storage.Invalid("only newsletters have a message id")
	}
	if len(in.MessageID) > MaxMessageIDLen {
		return nil, false, storage.Invalid("the message id must be at most %d bytes", MaxMessageIDLen)
	}
	var msgDigest string
	if in.MessageID != "" {
		msgDigest = messageIDDigest(in.MessageID)
	}
	var norm string
	if in.URL != "" || in.Type == TypeArticle {
		n, err := NormalizeURL(in.URL)
		if err != nil {
			return nil, false, err
		}
		norm = n
	}
	var err error
	if in.Title, err = storage.CleanLine(in.Title, MaxTitleLen, "title"); err != nil {
		return nil, false, err
	}
	if in.Description, err = storage.CleanLine(in.Description, MaxDescriptionLen, "description"); err != nil {
		return nil, false, err
	}
	if in.Author, err = storage.CleanLine(in.Author, MaxAuthorLen, "author"); err != nil {
		return nil, false, err
	}
	if len(in.LeadImage) > MaxURLLen {
		in.LeadImage = ""
	}
	if len(in.HTML)+len(in.Text) > MaxContentLen {
		return nil, false, storage.Invalid("content must be at most %d bytes", MaxContentLen)
	}
	if len(in.LabelIDs) > MaxBatchIDs {
		return nil, false, storage.Invalid("too many labels")
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
	var out *SavedItem
	created := false
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		created = false
		if msgDigest != "" {
			// The read makes a concurrent save of the same message conflict,
			// so Update retries it and it finds this one's item.
			if id, err := tx.Get(messageIDKey(memberID, msgDigest)); err == nil {
				var cur SavedItem
				err := getItem(tx, itemKey(memberID, string(id)), &cur)
				if err == nil {
					out = &cur
					return nil
				}
				if !errors.Is(err, storage.ErrNotFound) {
					return err
				}
			} else if !errors.Is(err, storage.ErrNotFound) {
				return err
			}
		}
		if in.finishesFetch != "" {
			v, err := tx.Get(fetchKey(memberID, in.finishesFetch))
			if err != nil {
				return err
			}
			if err := tx.Delete(fetchKey(memberID, in.finishesFetch)); err != nil {
				return err
			}
			var pending SavedItem
			if err := getItem(tx, itemKey(memberID, in.finishesFetch), &pending); err != nil {
				return err // storage.ErrNotFound: gone meanwhile, nothing saved
			}
			if u, _, job := parseFetchValue(string(v)); job != "" {
				if err := fetchDone(tx, memberID, job, u, ""); err != nil {
					return err
				}
			}
		}
		t := storage.Now()
		var old *SavedItem
		if norm != "" && in.Type == TypeArticle {
			if id, err := tx.Get(urlKey(memberID, norm)); err == nil {
				var cur SavedItem
				if err := getItem(tx, itemKey(memberID, string(id)), &cur); err == nil {
					old = &cur
				} else if !errors.Is(err, storage.ErrNotFound) {
					return err
				}
			} else if !errors.Is(err, storage.ErrNotFound) {
				return err
			}
		}
		it := &SavedItem{}
		if old != nil {
			c := *old
			c.LabelIDs = append([]string(nil), old.LabelIDs...)
			it = &c
			if in.finishesFetch == "" { // a finished fetch keeps where the member put the item
				it.Status = StatusActive
				it.DeletedAt = nil
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
			it.Status = StatusActive
			it.CreatedAt = t
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
		}
		out = it
		return writeItem(tx, c)
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// SavedItem returns one of the member's items.
func (s Store) SavedItem(ctx context.Context, memberID, id string) (*SavedItem, error) {
	var it SavedItem
	err := s.st.View(ctx, func(tx *storage.Tx) error { return getItem(tx, itemKey(memberID, id), &it) })
	if err != nil {
		return nil, err
	}
	return &it, nil
}

// SavedItems returns the member's items with ids, in that order, skipping
// unknown ids.
func (s Store) SavedItems(ctx context.Context, memberID string, ids []string) ([]*SavedItem, error) {
	var out []*SavedItem
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		for _, id := range ids {
			var it SavedItem
			err := getItem(tx, itemKey(memberID, id), &it)
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, &it)
		}
		return nil
	})
	return out, err
}

// ItemContent returns the content of a saved item.
func (s Store) ItemContent(ctx context.Context, memberID, id string) (*ItemContent, error) {
	var c ItemContent
	err := s.st.View(ctx, func(tx *storage.Tx) error { return tx.GetJSON(contentKey(memberID, id), &c) })
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// updateItems applies fn to each of the member's items with ids (all must
// exist), moving updatedAt, and returns them. It is one transaction unless
// the items are too big for one (see UpdateInParts).
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
	exist := func(tx *storage.Tx, ids []string) error {
		for _, id := range ids {
			if _, err := tx.Get(itemKey(memberID, id)); err != nil {
				return err
			}
		}
		return nil
	}
	err := s.st.UpdateInParts(ctx, unique, exist, func(tx *storage.Tx, ids []string) error {
		for _, id := range ids {
			var old SavedItem
			if err := getItem(tx, itemKey(memberID, id), &old); err != nil {
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
		it.Status = status
		if status == StatusDeleted {
			t := storage.Now()
			it.DeletedAt = &t
		} else {
			it.DeletedAt = nil
		}
		return nil
	})
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
func (s Store) SetItemLabels(ctx context.Context, memberID string, ids []string, c LabelChange) ([]*SavedItem, error) {
	var requested []string
	if c.Set != nil {
		requested = append(requested, (*c.Set)...)
	}
	requested = append(requested, c.Add...)
	return s.updateItems(ctx, memberID, ids, func(tx *storage.Tx, it *SavedItem) error {
		want := append([]string(nil), it.LabelIDs...)
		if c.Set != nil {
			want = append([]string(nil), (*c.Set)...)
		}
		want = append(want, c.Add...)
		var next []string
		for _, l := range want {
			if !contains(next, l) && !contains(c.Remove, l) {
				next = append(next, l)
			}
		}
		if len(next) > MaxBatchIDs {
			return storage.Invalid("too many labels")
		}
		valid, err := memberLabelIDs(tx, memberID, next)
		if err != nil {
			return err
		}
		for _, l := range requested {
			if !c.SkipUnknown && !contains(valid, l) && !contains(c.Remove, l) {
				return storage.ErrNotFound
			}
		}
		next = valid
		it.LabelIDs = next
		return nil
	})
}

// PermanentlyDeleteItems removes items that are in the trash. An id that is
// unknown or not in the trash is storage.ErrNotFound and nothing is deleted.
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
	return s.st.UpdateInParts(ctx, ids, each(false), each(true))
}

// EmptyTrash permanently deletes every item in the member's trash and
// returns how many there were.
func (s Store) EmptyTrash(ctx context.Context, memberID string) (int, error) {
	total := 0
	for {
		n := 0
		err := s.st.Update(ctx, func(tx *storage.Tx) error {
			n = 0
			var ids []string
			prefix := itemIndexPrefix(memberID, StatusDeleted, SortCreatedAt)
			err := tx.Scan(prefix, nil, false, true, func(k, _ []byte) (bool, error) {
				ids = append(ids, strconv.FormatUint(binary.BigEndian.Uint64(k[len(k)-8:]), 10))
				return len(ids) < 200, nil
			})
			if err != nil {
				return err
			}
			for _, id := range ids {
				var it SavedItem
				if err := getItem(tx, itemKey(memberID, id), &it); err != nil {
					if errors.Is(err, storage.ErrNotFound) {
						continue
					}
					return err
				}
				if err := removeItem(tx, &it); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		if n == 0 {
			return total, nil
		}
	}
}

// touchItems moves updatedAt of the member's items with ids (used when a
// label they carry changes).
func touchItems(tx *storage.Tx, memberID string, ids []string, fn func(it *SavedItem)) error {
	t := storage.Now()
	for _, id := range ids {
		var old SavedItem
		err := getItem(tx, itemKey(memberID, id), &old)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		it := old
		it.LabelIDs = append([]string(nil), old.LabelIDs...)
		if fn != nil {
			fn(&it)
		}
		if err := updateItem(tx, &old, &it, t); err != nil {
			return err
		}
	}
	return nil
}

// ForEachSavedItem calls fn for every item of the member with its content,
// newest first, from one consistent snapshot (for exports).
func (s Store) ForEachSavedItem(ctx context.Context, memberID string, fn func(it *SavedItem, c *ItemContent) error) error {
	return s.st.View(ctx, func(tx *storage.Tx) error {
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

// --- pages ---

// ItemFilter selects saved items (the parsed `q` of the entries query).
type ItemFilter struct {
	Status        string // default StatusActive
	Type          string // "" for both
	LabelsAll     [][]string
	LabelsNot     []string
	HasHighlights *bool
	NoLabels      *bool
	SavedFrom     *time.Time // inclusive
	SavedTo       *time.Time // exclusive
	UpdatedFrom   *time.Time // inclusive
	UpdatedTo     *time.Time // exclusive
	Site          string
	Text          string
	ProgressFrom  *float64
	ProgressTo    *float64
	MinutesFrom   *int // reading time, at 200 words a minute
	MinutesTo     *int
}

// PageRequest asks for one page of a keyset-paginated list.
type PageRequest struct {
	Field SortField
	Desc  bool
	First int
	After string // the cursor of the last item of the previous page
}

// ItemPage is one page of saved items.
type ItemPage struct {
	Items   []*SavedItem
	Cursors []string
	HasNext bool
}

// ErrBadCursor is returned for a cursor that is malformed or belongs to
// another sort order.
var ErrBadCursor = storage.Invalid("the cursor is malformed or belongs to another sort order")

const cursorVersion = 1

func makeCursor(kind byte, f SortField, desc bool, suffix []byte) string {
	b := make([]byte, 0, 3+len(suffix))
	d := byte(0)
	if desc {
		d = 1
	}
	b = append(b, cursorVersion<<4|kind, sortFieldCode[f][0], d)
	b = append(b, suffix...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseCursor(c string, kind byte, f SortField, desc bool) ([]byte, error) {
	if len(c) > 1024 {
		return nil, ErrBadCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 3+8 {
		return nil, ErrBadCursor
	}
	d := byte(0)
	if desc {
		d = 1
	}
	if b[0] != cursorVersion<<4|kind || b[1] != sortFieldCode[f][0] || b[2] != d {
		return nil, ErrBadCursor
	}
	return b[3:], nil
}

// keysetScan walks an index from after (exclusive) in the requested order,
// calling fn with each key suffix (and with its value when values is set)
// until fn returns false.
func keysetScan(tx *storage.Tx, prefix []byte, desc bool, after, lower, upper []byte, values bool, fn func(suffix, val []byte) (bool, error)) error {
	return keysetScanSkipping(tx, prefix, desc, after, lower, upper, values, nil, fn)
}

// keysetScanSkipping is keysetScan that passes over the suffixes skip
// (when not nil) reports, without reading their values.
func keysetScanSkipping(tx *storage.Tx, prefix []byte, desc bool, after, lower, upper []byte, values bool, skip func(suffix []byte) bool, fn func(suffix, val []byte) (bool, error)) error {
	var start []byte
	switch {
	case after != nil:
		start = append(append([]byte{}, prefix...), after...)
	case !desc && lower != nil:
		start = append(append([]byte{}, prefix...), lower...)
	case desc && upper != nil:
		start = append(append([]byte{}, prefix...), upper...)
	}
	var skipKey func(k []byte) bool
	if skip != nil {
		skipKey = func(k []byte) bool { return skip(k[len(prefix):]) }
	}
	return tx.ScanSkipping(prefix, start, desc, !values, skipKey, func(k, v []byte) (bool, error) {
		suf := k[len(prefix):]
		if after != nil && bytes.Equal(suf, after) {
			return true, nil
		}
		if !desc && upper != nil && bytes.Compare(suf, upper) >= 0 {
			return false, nil
		}
		if desc && lower != nil && bytes.Compare(suf, lower) < 0 {
			return false, nil
		}
		if desc && upper != nil && bytes.Compare(suf, upper) >= 0 {
			return true, nil
		}
		return fn(suf, v)
	})
}

// StatusAll in ItemFilter.Status lists items of every status (Inboxt's q
// without in:), merged in one order.
const StatusAll = "ALL"

// StatusNotDeleted in ItemFilter.Status lists the inbox and the archive,
// merged in one order (Omnivore's search without in:trash).
const StatusNotDeleted = "NOT_DELETED"

// SavedItemsPage returns one page of the member's items matching f, sorted
// by p.Field then id, starting after p.After: a cursor of a previous page,
// or the id of an item (Inboxt's cursors are item ids), which pages on from
// that item's place in the order whatever its status.
func (s Store) SavedItemsPage(ctx context.Context, memberID string, f ItemFilter, p PageRequest) (*ItemPage, error) {
	statuses := []string{f.Status}
	switch f.Status {
	case "":
		statuses[0] = StatusActive
	case StatusAll:
		statuses = []string{StatusActive, StatusArchived, StatusDeleted}
	case StatusNotDeleted:
		statuses = []string{StatusActive, StatusArchived}
	default:
		if _, ok := statusCode[f.Status]; !ok {
			return nil, storage.Invalid("unknown status")
		}
	}
	if !ValidSortField(p.Field) {
		return nil, storage.Invalid("unknown sort field")
	}
	// A time range on the sort field bounds the scan itself.
	var lower, upper []byte
	rangeFrom, rangeTo := f.SavedFrom, f.SavedTo
	if p.Field == SortUpdatedAt {
		rangeFrom, rangeTo = f.UpdatedFrom, f.UpdatedTo
	}
	if p.Field == SortCreatedAt || p.Field == SortUpdatedAt {
		if rangeFrom != nil {
			lower = encUint64(encTime(nil, *rangeFrom), 0)
		}
		if rangeTo != nil {
			upper = encUint64(encTime(nil, *rangeTo), 0)
		}
	}
	first := max(p.First, 0)
	page := &ItemPage{}
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		var after []byte
		if p.After != "" {
			a, err := parseCursor(p.After, 1, p.Field, p.Desc)
			if err != nil && storage.IsID(p.After) {
				var it SavedItem
				if gerr := getItem(tx, itemKey(memberID, p.After), &it); gerr == nil {
					a, err = itemSortValue(&it, p.Field), nil
				} else if errors.Is(gerr, storage.ErrNotFound) {
					err = storage.Invalid("after: no saved item has the id %s", p.After)
				} else {
					err = gerr
				}
			}
			if err != nil {
				return err
			}
			after = a
		}
		m, err := newItemMatcher(tx, memberID, f)
		if err != nil {
			return err
		}
		if !m.impossible && m.indexable() {
			ids, ok, err := searchCandidates(tx, memberID, f, m, statuses, p.Field, first)
			if err != nil {
				return err
			}
			if ok {
				return candidatePage(tx, m, ids, statuses, p, after, lower, upper, page)
			}
			if m.ordered != nil {
				return orderedPage(tx, m, statuses, p, after, lower, upper, page)
			}
		}
		// One allocation for the page's items, and one item key buffer.
		// One allocation for a page's items, one for their index key
		// suffixes (each ends where ends says), one item key buffer. Past
		// a page (more statuses matching), items are allocated one by one.
		items := make([]SavedItem, min(first, 1000)+1)
		found := make([]*SavedItem, 0, len(items))
		arena := make([]byte, 0, len(items)*24)
		ends := make([]int, 0, len(items))
		itemPrefix := itemKey(memberID, "")
		k := make([]byte, len(itemPrefix), len(itemPrefix)+20)
		copy(k, itemPrefix)
		contributed := 0
		// bound, once the statuses walked have given first+1 matches, is
		// the last of the first+1 in the order: a later status's entries
		// past it cannot be on the page, so its walk stops there.
		var bound []byte
		beyond := func(suf []byte) bool {
			if bound == nil {
				return false
			}
			c := bytes.Compare(suf, bound)
			return (p.Desc && c < 0) || (!p.Desc && c > 0)
		}
		for _, status := range statuses {
			// Each status gives at most first+1 matches: the merged page
			// needs no more to know whether another follows.
			n := 0
			prefix := itemIndexPrefix(memberID, status, p.Field)
			// Items outside the prefilter are passed over by key, their
			// records not read; the budget counts them.
			var skip func(suf []byte) bool
			if m.prefilter != nil {
				skip = func(suf []byte) bool {
					if _, ok := m.prefilter[binary.BigEndian.Uint64(suf[len(suf)-8:])]; ok || beyond(suf) {
						return false
					}
					m.examined++
					over, err := m.overBudget()
					return err == nil && !over
				}
			}
			err := keysetScanSkipping(tx, prefix, p.Desc, after, lower, upper, true, skip, func(suf, rec []byte) (bool, error) {
				if beyond(suf) {
					return false, nil
				}
				if m.prefilter != nil {
					if _, ok := m.prefilter[binary.BigEndian.Uint64(suf[len(suf)-8:])]; !ok {
						// Over the budget (skip let it through).
						if over, err := m.overBudget(); err != nil || over {
							if err == nil {
								err = ErrSearchTooBroad
							}
							return false, err
						}
						return true, nil
					}
				}
				var it *SavedItem
				if len(found) < len(items) {
					it = &items[len(found)]
				} else {
					it = new(SavedItem)
				}
				if len(rec) > 0 {
					if err := parseItemRecord(rec, it); err != nil {
						return false, err
					}
				} else {
					k = strconv.AppendUint(k[:len(itemPrefix)], binary.BigEndian.Uint64(suf[len(suf)-8:]), 10)
					if err := getItem(tx, k, it); err != nil {
						if errors.Is(err, storage.ErrNotFound) {
							return true, nil
						}
						return false, err
					}
				}
				ok, err := m.matchWithinBudget(it)
				if err != nil || !ok {
					return err == nil, err
				}
				found = append(found, it)
				arena = append(arena, suf...)
				ends = append(ends, len(arena))
				n++
				return n <= first, nil
			})
			if err != nil {
				return err
			}
			if n > 0 {
				contributed++
			}
			if len(statuses) > 1 && len(found) > first {
				// The last of the first+1 matches so far in the order.
				c := make([][]byte, len(ends))
				start := 0
				for i, end := range ends {
					c[i], start = arena[start:end], end
				}
				sort.Slice(c, func(a, b int) bool {
					if p.Desc {
						return bytes.Compare(c[a], c[b]) > 0
					}
					return bytes.Compare(c[a], c[b]) < 0
				})
				bound = append(bound[:0], c[first]...)
			}
		}
		sufs := make([][]byte, len(found))
		for i, end := range ends {
			start := 0
			if i > 0 {
				start = ends[i-1]
			}
			sufs[i] = arena[start:end:end]
		}
		if contributed > 1 {
			idx := make([]int, len(found))
			for i := range idx {
				idx[i] = i
			}
			sort.SliceStable(idx, func(a, b int) bool {
				c := bytes.Compare(sufs[idx[a]], sufs[idx[b]])
				if p.Desc {
					return c > 0
				}
				return c < 0
			})
			f2, s2 := make([]*SavedItem, len(idx)), make([][]byte, len(idx))
			for i, j := range idx {
				f2[i], s2[i] = found[j], sufs[j]
			}
			found, sufs = f2, s2
		}
		if len(found) > first {
			page.HasNext = true
			found, sufs = found[:first], sufs[:first]
		}
		page.Items = found
		page.Cursors = make([]string, len(sufs))
		for i, suf := range sufs {
			page.Cursors[i] = makeCursor(1, p.Field, p.Desc, suf)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// The search budget: a page that would look at more items than
// maxExamined, or read the text of more than maxVerified, answers
// ErrSearchTooBroad instead (once the member's search index is built;
// before, search scans as it always did).
const (
	maxExamined = 100000
	maxVerified = 10000
)

// ErrSearchTooBroad is the answer of a search over its budget.
var ErrSearchTooBroad = storage.Invalid("this search would read more than %d saved items or the text of more than %d; add a longer word or a filter (label:, site:, type:, has:, saved:) that fewer items match", maxExamined, maxVerified)

// candidatePage fills page from the candidate items ids (a superset of the
// matches, possibly with repeats), sorted as the index would give them.
func candidatePage(tx *storage.Tx, m *itemMatcher, ids []string, statuses []string, p PageRequest, after, lower, upper []byte, page *ItemPage) error {
	type hit struct {
		it  *SavedItem
		suf []byte
	}
	var hits []hit
	seen := make(map[string]bool, len(ids))
	k := itemKey(m.memberID, "")
	n := len(k)
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		it := new(SavedItem)
		k = append(k[:n], id...)
		if err := getItem(tx, k, it); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			return err
		}
		if !contains(statuses, it.Status) {
			continue
		}
		suf := itemSortValue(it, p.Field)
		if after != nil {
			c := bytes.Compare(suf, after)
			if (!p.Desc && c <= 0) || (p.Desc && c >= 0) {
				continue
			}
		}
		if (lower != nil && bytes.Compare(suf, lower) < 0) || (upper != nil && bytes.Compare(suf, upper) >= 0) {
			continue
		}
		ok, err := m.match(it)
		if err != nil {
			return err
		}
		if ok {
			hits = append(hits, hit{it, suf})
		}
	}
	sort.Slice(hits, func(a, b int) bool {
		c := bytes.Compare(hits[a].suf, hits[b].suf)
		if p.Desc {
			return c > 0
		}
		return c < 0
	})
	first := max(p.First, 0)
	if len(hits) > first {
		page.HasNext = true
		hits = hits[:first]
	}
	page.Items = make([]*SavedItem, len(hits))
	page.Cursors = make([]string, len(hits))
	for i, h := range hits {
		page.Items[i] = h.it
		page.Cursors[i] = makeCursor(1, p.Field, p.Desc, h.suf)
	}
	return nil
}

type itemMatcher struct {
	tx         *storage.Tx
	memberID   string
	f          ItemFilter
	labelsAll  [][]string // label ids
	labelsNot  []string
	impossible bool
	needle     []byte // the case-folded free text (FoldText), nil for none
	// examined and verified count the items match looked at, and the
	// texts among them it read (for the search budget).
	examined, verified int
	// prefilter, when set, holds every item that can match (from the
	// filters' keys): the scan along the sort order skips the others by
	// their key, without decoding their record.
	prefilter map[uint64]struct{}
	// ordered, when set, is a plan that walks one filter's ordered keys
	// (orderedPage) instead of the statuses' indexes.
	ordered *searchPlan
	// readyKnown and ready: whether the member's index is built, read
	// when a scan first passes the budget.
	readyKnown, ready bool
}

// overBudget reports whether the scan has passed the search budget, which
// applies once the member's index is built (before, searches scan as they
// always did).
func (m *itemMatcher) overBudget() (bool, error) {
	if m.examined <= maxExamined && m.verified <= maxVerified {
		return false, nil
	}
	if !m.readyKnown {
		r, err := searchReady(m.tx, m.memberID)
		if err != nil {
			return false, err
		}
		m.readyKnown, m.ready = true, r
	}
	return m.ready, nil
}

// matchWithinBudget is match, failing with ErrSearchTooBroad once the
// search has gone over its budget (overBudget).
func (m *itemMatcher) matchWithinBudget(it *SavedItem) (bool, error) {
	ok, err := m.match(it)
	if err != nil {
		return false, err
	}
	if over, err := m.overBudget(); err != nil {
		return false, err
	} else if over {
		return false, ErrSearchTooBroad
	}
	return ok, nil
}

func newItemMatcher(tx *storage.Tx, memberID string, f ItemFilter) (*itemMatcher, error) {
	m := &itemMatcher{tx: tx, memberID: memberID, f: f}
	if t := strings.TrimSpace(f.Text); t != "" {
		m.needle = appendFold(nil, t)
	}
	if len(f.LabelsAll) > 0 || len(f.LabelsNot) > 0 {
		labels, err := labels(tx, memberID)
		if err != nil {
			return nil, err
		}
		byName := map[string][]string{}
		for _, l := range labels {
			n := labelNameFold(l.Name)
			byName[n] = append(byName[n], l.ID)
		}
		for _, group := range f.LabelsAll {
			var ids []string
			for _, name := range group {
				ids = append(ids, byName[labelNameFold(name)]...)
			}
			if len(ids) == 0 {
				m.impossible = true
			}
			m.labelsAll = append(m.labelsAll, ids)
		}
		for _, name := range f.LabelsNot {
			m.labelsNot = append(m.labelsNot, byName[labelNameFold(name)]...)
		}
	}
	return m, nil
}

func (m *itemMatcher) match(it *SavedItem) (bool, error) {
	f := m.f
	m.examined++
	if m.impossible {
		return false, nil
	}
	if f.Type != "" && it.Type != f.Type {
		return false, nil
	}
	for _, group := range m.labelsAll {
		found := false
		for _, id := range group {
			if contains(it.LabelIDs, id) {
				found = true
				break
			}
		}
		if !found {
			return false, nil
		}
	}
	for _, id := range m.labelsNot {
		if contains(it.LabelIDs, id) {
			return false, nil
		}
	}
	if f.HasHighlights != nil && (it.HighlightCount > 0) != *f.HasHighlights {
		return false, nil
	}
	if f.NoLabels != nil && (len(it.LabelIDs) == 0) != *f.NoLabels {
		return false, nil
	}
	if f.SavedFrom != nil && it.CreatedAt.Before(*f.SavedFrom) {
		return false, nil
	}
	if f.SavedTo != nil && !it.CreatedAt.Before(*f.SavedTo) {
		return false, nil
	}
	if f.UpdatedFrom != nil && it.UpdatedAt.Before(*f.UpdatedFrom) {
		return false, nil
	}
	if f.UpdatedTo != nil && !it.UpdatedAt.Before(*f.UpdatedTo) {
		return false, nil
	}
	if f.Site != "" {
		// A substring of the domain, as Inboxt's sourceDomain contains
		// (saved-item.service.ts getPaginated, Inboxt/inboxt@45f4314).
		if !containsFold(it.SourceDomain, strings.ToLower(f.Site)) {
			return false, nil
		}
	}
	if f.ProgressFrom != nil && it.ReadingProgress < *f.ProgressFrom {
		return false, nil
	}
	if f.ProgressTo != nil && it.ReadingProgress > *f.ProgressTo {
		return false, nil
	}
	minutes := (it.WordCount + 199) / 200
	if f.MinutesFrom != nil && minutes < *f.MinutesFrom {
		return false, nil
	}
	if f.MinutesTo != nil && minutes > *f.MinutesTo {
		return false, nil
	}
	if m.needle != nil {
		m.verified++
		return itemTextContains(m.tx, it, m.needle)
	}
	return true, nil
}

// indexable reports whether a search index can narrow the filter: free
// text, or a filter with keys of its own.
func (m *itemMatcher) indexable() bool {
	f := m.f
	return m.needle != nil || len(m.labelsAll) > 0 || f.Site != "" || f.Type != "" ||
		(f.HasHighlights != nil && *f.HasHighlights) || f.SavedFrom != nil || f.SavedTo != nil ||
		f.UpdatedFrom != nil || f.UpdatedTo != nil
}

// itemTextContains reports whether the title, description or content text
// of it contains the folded needle (folded as it is read: the index keeps
// no copy of the text).
func itemTextContains(tx *storage.Tx, it *SavedItem, needle []byte) (bool, error) {
	t := textBufs.Get().(*itemText)
	defer textBufs.Put(t)
	if err := readItemText(tx, t, it, needle); err != nil {
		return false, err
	}
	return t.contains(needle), nil
}

// containsFold reports whether s contains the lower-case needle, ignoring case.
func containsFold(s, needle string) bool {
	return strings.Contains(strings.ToLower(s), needle)
}
