package library

import (
	"net/url"
	"strings"
	"time"

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
	// hlBytes is the sum of highlightBytes over the item's highlights,
	// kept by every write that changes them so that the item's limit on
	// them (highlightLimits.room) reads none; unknownHighlightBytes for a
	// record written before it was kept (knownHighlightBytes).
	hlBytes int
	// Sender of a newsletter.
	FromName    string `json:"from_name,omitempty"`
	FromAddress string `json:"from_address,omitempty"`
	// TrashGen marks an item in the trash with the emptying of the trash
	// that deletes it (trash.go; 0: any). Only writeItem sets it.
	TrashGen uint64 `json:"-"`
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
	// FetchImages queues a fetch of the images HTML names, to be stored
	// with the item (images.go); ImagesPrivate lets that fetch reach
	// private addresses, as QueueFetch's private does. A fetched page
	// (FinishFetch) queues its images whatever these say.
	FetchImages, ImagesPrivate bool
	// Status is where the save puts the item: StatusActive ("": the
	// inbox), StatusArchived or StatusDeleted (the trash), also an item
	// saved before. A fetch that finishes (FinishFetch) keeps the item
	// where it is, so what the save asked for, or where the member moved
	// it since, holds.
	Status string
	// SavedAt, when set, is the item's saved date (CreatedAt), also for
	// an item saved before; zero: now for a new item, and the date it has
	// for one saved before. CheckSavedAt says which dates are taken.
	SavedAt time.Time

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

// MaxSavedAtAhead is how far past the store's clock a saved date may be.
// A client whose clock runs a little fast saves at now; a later date is
// refused, as an item saved in the future would stay above every later
// save until then and count as new in every sync since.
const MaxSavedAtAhead = 15 * time.Minute

// EarliestSavedAt is the earliest saved date an item keeps: the ordered
// keys hold times from late 1677 to 2262 (encTime), and an earlier date
// would sort among the earliest by the item's id, not its date.
var EarliestSavedAt = time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC)

// tooEarly reports whether t is earlier than a saved date may be
// (EarliestSavedAt): the one bound of saveUrl's savedAt and an import's
// dates.
func tooEarly(t time.Time) bool { return t.Before(EarliestSavedAt) }

// CheckSavedAt returns t as an item keeps its saved date (UTC, to the
// millisecond; now when t is ahead of the clock by at most
// MaxSavedAtAhead), or an *storage.InvalidError about savedAt when t is
// later, or earlier than EarliestSavedAt (the zero time among them: a
// caller without a date does not ask for one).
func CheckSavedAt(t time.Time) (time.Time, error) {
	now := storage.Now()
	switch {
	case tooEarly(t):
		return time.Time{}, storage.InvalidField("savedAt", "savedAt %s is earlier than %s, the earliest saved date the library keeps",
			t.UTC().Format(time.RFC3339), EarliestSavedAt.Format(time.DateOnly))
	case t.After(now.Add(MaxSavedAtAhead)):
		return time.Time{}, storage.InvalidField("savedAt", "savedAt %s is later than now (%s): a saved date may not be in the future",
			t.UTC().Format(time.RFC3339), now.Format(time.RFC3339))
	case t.After(now):
		return now, nil
	}
	return t.UTC().Truncate(time.Millisecond), nil
}

// NormalizeURL returns the form of an article URL used to recognise the same
// article saved twice: absolute http(s), lower-case scheme and host, no
// default port, no fragment, no tracking parameters (urltracking.go).
func NormalizeURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > MaxURLLen {
		return "", storage.InvalidField("url", "url must be an absolute http or https URL of at most %d characters", MaxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "HTTP" && u.Scheme != "HTTPS") || u.Host == "" || u.User != nil {
		return "", storage.InvalidField("url", "url must be an absolute http or https URL without credentials")
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
	if q := withoutTracking(u.RawQuery); q != u.RawQuery {
		u.RawQuery, u.ForceQuery = q, false
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
