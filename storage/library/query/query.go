// Package query reads the library's search language: the q of Inboxt's
// entries, which the GraphQL API, the library pages, the feeds and the
// books all take, with Omnivore's search query as a dialect of it. It
// turns a query into a library.ItemFilter and a sort; it reads nothing.
package query

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// MaxTextLen bounds the free text of q (in characters), as Inboxt does.
const MaxTextLen = 200

// MaxBytes bounds the whole of q: Inboxt's operators are outside
// MaxTextLen, but label lists and the like still cost work per item.
const MaxBytes = 2000

// Query is a parsed q: what to list, how to filter it, and a sort given
// in q (which wins over any other choice of sort).
type Query struct {
	// Highlights: q asked for highlights (type:highlight), not items.
	Highlights bool
	Filter     library.ItemFilter
	// Sort is the sort q named, if any.
	Sort *Sort
}

// Sort is a sort field and direction.
type Sort struct {
	Field library.SortField
	Desc  bool
}

// Error is a query refused; Msg is for the member, in plain words.
// TooLong marks free text over MaxTextLen, which Inboxt answers as a bad
// request where it answers the others as bad input.
type Error struct {
	Msg     string
	TooLong bool
}

func (e *Error) Error() string { return e.Msg }

func badInput(format string, a ...any) error {
	return &Error{Msg: fmt.Sprintf(format, a...)}
}

// sortNames maps the names q's sort: accepts to sort fields.
var sortNames = map[string]library.SortField{
	"date": library.SortCreatedAt, "saved": library.SortCreatedAt, "createdat": library.SortCreatedAt, "created": library.SortCreatedAt,
	"updated": library.SortUpdatedAt, "updatedat": library.SortUpdatedAt,
	"title":     library.SortTitle,
	"wordcount": library.SortWordCount, "words": library.SortWordCount, "length": library.SortWordCount,
	"readingprogress": library.SortReadingProgress, "progress": library.SortReadingProgress,
}

// FiltersBeyondListing reports whether q filters by more than a status
// and a type (what a page lists by walking its own keys). A q that is
// refused costs nothing more: it reads nothing.
func FiltersBeyondListing(q string) bool {
	s, err := Parse(q)
	if err != nil {
		return false
	}
	f := s.Filter
	f.Status, f.Type = "", ""
	return !reflect.ValueOf(f).IsZero()
}

// Parse reads q as Inboxt's entries resolver does
// (apps/api/src/managers/entry-manager/entry-manager.service.ts, parseQuery
// and getMany, Inboxt/inboxt@45f4314): terms split at spaces outside double
// quotes; key:value with an optional leading - (which negates label:, has:
// and no:, and is ignored on the others, as there); in:inbox|archive|trash
// (absent or any other value: every status); type:article|newsletter|
// highlight (all or any other value: items of both types);
// label:a[,b] (any of; several label: terms all apply), -label:x;
// has:highlights, -has:highlights, no:label[s], -no:label[s]; saved:FROM..TO
// (saved:DATE is from that date, as in Inboxt); site:x (a substring of the
// item's domain); sort:field_dir (date_desc, title_asc, …). Anything else is
// free text over title, description and content, at most 200 characters.
//
// Hearth adds, and keeps: in:all, has:labels, no:highlights,
// updated:FROM..TO (for sync), progress:MIN..MAX, reading-time:MIN..MAX
// (minutes), sort:field[-asc|-desc] with the names in sortNames, RFC 3339
// times in ranges (one RFC 3339 time alone is from then on), and a TO date
// that includes its whole day.
//
// With type:highlight, the item-only filters (in:, label:, has:, no:,
// progress:, reading-time:) are ignored as in Inboxt's highlight query;
// text, site: and saved: apply to the highlight's item, and a title sort is
// by the item's title.
func Parse(q string) (*Query, error) { return ParseIn(q, Inboxt) }

// Syntax names whose meaning q's operators take where Inboxt's and
// Omnivore's differ: one grammar, and these differences only.
type Syntax int

const (
	// Inboxt is the q of Inboxt's entries (Parse).
	Inboxt Syntax = iota
	// Omnivore is Omnivore's search query as its search and
	// updatesSince read it (packages/api/src/services/library_item.ts,
	// buildQueryString, omnivore-app/omnivore@322ce62), where it differs:
	//   - no in: is every item but the trash's (Inboxt: every status);
	//   - in:all is the inbox and the archive (Inboxt: every status);
	//   - in: with another value than all, archive or trash is the inbox
	//     (Inboxt: every status);
	//   - saved:X and updated:X with one value are from X on, whatever X
	//     (Hearth's updated:DATE is that one day).
	Omnivore
)

// ParseIn reads q in the dialect of a syntax (Parse is Inboxt's).
func ParseIn(q string, dialect Syntax) (*Query, error) {
	if n := len(q); n > MaxBytes {
		return nil, badInput("q must be at most %d bytes (it has %d)", MaxBytes, n)
	}
	s := &Query{}
	f := &s.Filter
	f.Status = library.StatusAll
	var text []string
	yes, no := true, false
	var item library.ItemFilter // item-only filters, dropped for type:highlight
	item.Status = library.StatusAll
	if dialect == Omnivore {
		item.Status = library.StatusNotDeleted
	}
	for _, tok := range splitQuery(q) {
		key, val, ok := strings.Cut(tok, ":")
		lkey := strings.ToLower(key)
		neg := strings.HasPrefix(lkey, "-")
		base := strings.TrimPrefix(lkey, "-")
		if !ok || val == "" || !knownOperator(base) {
			text = append(text, unquote(tok))
			continue
		}
		val = unquote(val)
		lval := strings.ToLower(val)
		switch base {
		case "in":
			if dialect == Omnivore {
				item.Status = OmnivoreFolder(lval)
				continue
			}
			item.Status = inboxtFolder(lval)
		case "type":
			s.Highlights = false
			switch lval {
			case "article":
				f.Type = library.TypeArticle
			case "newsletter":
				f.Type = library.TypeNewsletter
			case "highlight", "highlights":
				f.Type = ""
				s.Highlights = true
			default:
				f.Type = ""
			}
		case "label":
			if neg {
				item.LabelsNot = append(item.LabelsNot, splitList(val)...)
			} else {
				item.LabelsAll = append(item.LabelsAll, splitList(val))
			}
		case "has", "no":
			// has:x is true, no:x false; a leading - turns either around.
			v := (base == "has") != neg
			b := &yes
			if !v {
				b = &no
			}
			switch lval {
			case "highlights", "highlight":
				item.HasHighlights = b
			case "labels", "label":
				nl := !*b
				item.NoLabels = &nl
			default: // Inboxt: free text
				text = append(text, unquote(tok))
			}
		case "saved", "updated":
			from, to, err := parseTimeRange(val, base == "saved" || dialect == Omnivore)
			if err != nil {
				return nil, badInput("%s: %v", base, err)
			}
			if base == "saved" {
				f.SavedFrom, f.SavedTo = from, to
			} else {
				f.UpdatedFrom, f.UpdatedTo = from, to
			}
		case "site":
			f.Site = strings.TrimPrefix(lval, "www.")
		case "progress":
			from, to, err := parseNumberRange(val)
			if err != nil {
				return nil, badInput("progress: %v", err)
			}
			item.ProgressFrom, item.ProgressTo = from, to
		case "reading-time":
			from, to, err := parseMinutesRange(val)
			if err != nil {
				return nil, badInput("reading-time: %v", err)
			}
			item.MinutesFrom, item.MinutesTo = from, to
		case "sort":
			o, err := parseSortValue(lval)
			if err != nil {
				return nil, err
			}
			s.Sort = o
		}
	}
	f.Text = strings.Join(text, " ")
	if n := utf8.RuneCountInString(f.Text); n > MaxTextLen {
		// Inboxt's words (entry-manager.service.ts getMany).
		// Inboxt's AppException (BAD_REQUEST, the sentence as the message),
		// not an input validation error (entry-manager.service.ts @ 45f4314).
		return nil, &Error{Msg: fmt.Sprintf("Free text search is limited to %d characters. Please try again with a shorter query.", MaxTextLen), TooLong: true}
	}
	if !s.Highlights {
		f.Status = item.Status
		f.LabelsAll, f.LabelsNot = item.LabelsAll, item.LabelsNot
		f.HasHighlights, f.NoLabels = item.HasHighlights, item.NoLabels
		f.ProgressFrom, f.ProgressTo = item.ProgressFrom, item.ProgressTo
		f.MinutesFrom, f.MinutesTo = item.MinutesFrom, item.MinutesTo
	} else {
		f.Type = ""
	}
	return s, nil
}

// inboxtFolder is the status an in: value selects in Inboxt's syntax.
func inboxtFolder(v string) string {
	switch v {
	case "inbox":
		return library.StatusActive
	case "archive":
		return library.StatusArchived
	case "trash":
		return library.StatusDeleted
	default: // Inboxt: any other value is no status filter
		return library.StatusAll
	}
}

// OmnivoreFolder is the status an in: value (or updatesSince's folder)
// selects in Omnivore's syntax.
func OmnivoreFolder(v string) string {
	switch v {
	case "all":
		return library.StatusNotDeleted
	case "archive":
		return library.StatusArchived
	case "trash":
		return library.StatusDeleted
	default: // inbox, and Omnivore's other folders (following, library)
		return library.StatusActive
	}
}

func knownOperator(key string) bool {
	switch key {
	case "in", "type", "label", "has", "no", "saved", "updated", "site", "progress", "reading-time", "sort":
		return true
	}
	return false
}

// parseSortValue reads Inboxt's field_direction (date for createdAt) and
// Hearth's field[-direction].
func parseSortValue(v string) (*Sort, error) {
	name, dir := v, ""
	if i := strings.LastIndexAny(v, "-_"); i > 0 {
		name, dir = v[:i], v[i+1:]
	}
	field, ok := sortNames[name]
	if !ok {
		return nil, badInput("sort: takes date, saved, updated, title, wordCount or readingProgress, not %q", name)
	}
	o := &Sort{Field: field, Desc: field != library.SortTitle}
	switch dir {
	case "":
	case "asc":
		o.Desc = false
	case "desc":
		o.Desc = true
	default:
		return nil, badInput("sort: direction must be asc or desc, not %q", dir)
	}
	return o, nil
}

// splitQuery splits q at spaces outside double quotes.
func splitQuery(q string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range q {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case !quoted && (r == ' ' || r == '\t' || r == '\n' || r == '\r'):
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func unquote(s string) string { return strings.ReplaceAll(s, `"`, "") }

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseTimeRange reads FROM..TO, where each end is *, a date (YYYY-MM-DD,
// UTC; as TO it includes that whole day) or an RFC 3339 time. A single
// value is from then on when fromOnly is set (Inboxt's saved:DATE: its
// parseQuery takes the part before .. as from) or when it is an RFC 3339
// time, else that one day.
func parseTimeRange(v string, fromOnly bool) (from, to *time.Time, err error) {
	a, b, isRange := strings.Cut(v, "..")
	if !isRange && fromOnly {
		isRange, b = true, "*"
	}
	if !isRange {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			// One time (not a day) is from then on: what a sync sends
			// (updated:2024-05-01T10:00:00.000+02:00, Omnivore's plugins).
			t = t.UTC()
			return &t, nil, nil
		}
		d, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return nil, nil, fmt.Errorf("use FROM..TO with dates (2024-01-31), RFC 3339 times or *, not %q", v)
		}
		next := d.AddDate(0, 0, 1)
		return &d, &next, nil
	}
	parse := func(s string, end bool) (*time.Time, error) {
		if s == "*" || s == "" {
			return nil, nil
		}
		if d, err := time.Parse(time.DateOnly, s); err == nil {
			if end {
				d = d.AddDate(0, 0, 1)
			}
			return &d, nil
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a date (2024-01-31), an RFC 3339 time or *", s)
		}
		t = t.UTC()
		return &t, nil
	}
	if from, err = parse(a, false); err != nil {
		return nil, nil, err
	}
	if to, err = parse(b, true); err != nil {
		return nil, nil, err
	}
	return from, to, nil
}

// parseMinutesRange reads a range of whole minutes (reading-time:), as
// parseNumberRange reads it, cut to whole minutes.
func parseMinutesRange(v string) (from, to *int, err error) {
	f, t, err := parseNumberRange(v)
	if err != nil {
		return nil, nil, err
	}
	if f != nil {
		m := int(*f)
		from = &m
	}
	if t != nil {
		m := int(*t)
		to = &m
	}
	return from, to, nil
}

func parseNumberRange(v string) (from, to *float64, err error) {
	a, b, isRange := strings.Cut(v, "..")
	if !isRange {
		b = a
	}
	parse := func(s string) (*float64, error) {
		if s == "*" || s == "" {
			return nil, nil
		}
		n, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		return &n, nil
	}
	if from, err = parse(a); err != nil {
		return nil, nil, err
	}
	if to, err = parse(b); err != nil {
		return nil, nil, err
	}
	return from, to, nil
}
