package graphql

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// MaxQueryLen bounds the q argument of entries (in characters).
const MaxQueryLen = 200

// Page sizes of entries (Inboxt's first).
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
)

// pageSize turns the first argument into a page size: default 20 for zero
// or less, fractional values rounded down, at most 100.
func pageSize(first float64) int {
	if math.IsNaN(first) || first < 1 {
		return DefaultPageSize
	}
	if first > MaxPageSize {
		return MaxPageSize
	}
	return int(first)
}

// search is a parsed q: what to list, how to filter it, and a sort given
// in q (which wins over the sort argument).
type search struct {
	highlights bool
	filter     storage.ItemFilter
	sort       *sortOrder
}

type sortOrder struct {
	field storage.SortField
	desc  bool
}

// sortNames maps the names q's sort: accepts to sort fields.
var sortNames = map[string]storage.SortField{
	"saved": storage.SortCreatedAt, "createdat": storage.SortCreatedAt, "created": storage.SortCreatedAt,
	"updated": storage.SortUpdatedAt, "updatedat": storage.SortUpdatedAt,
	"title":     storage.SortTitle,
	"wordcount": storage.SortWordCount, "words": storage.SortWordCount, "length": storage.SortWordCount,
	"readingprogress": storage.SortReadingProgress, "progress": storage.SortReadingProgress,
}

// parseSearch reads Inboxt's query syntax: in:inbox|archive|trash,
// type:article|newsletter|highlight, label:a[,b] (any of), -label:x,
// has:highlights, has:labels, no:labels, no:highlights, saved:FROM..TO,
// updated:FROM..TO (dates or RFC 3339 times, * for an open end),
// site:domain, progress:MIN..MAX, reading-time:MIN..MAX (minutes),
// sort:field[-asc|-desc], and free text over title, description and
// content. Values may be double-quoted. Errors are for the client.
func parseSearch(q string) (*search, error) {
	if n := len([]rune(q)); n > MaxQueryLen {
		return nil, badInput("q must be at most %d characters (it has %d)", MaxQueryLen, n)
	}
	s := &search{}
	f := &s.filter
	var text []string
	var itemOnly []string
	yes, no := true, false
	for _, tok := range splitQuery(q) {
		key, val, ok := strings.Cut(tok, ":")
		lkey := strings.ToLower(key)
		if !ok || val == "" || !knownOperator(lkey) {
			text = append(text, unquote(tok))
			continue
		}
		val = unquote(val)
		lval := strings.ToLower(val)
		switch lkey {
		case "in":
			switch lval {
			case "inbox":
				f.Status = storage.StatusActive
			case "archive":
				f.Status = storage.StatusArchived
			case "trash":
				f.Status = storage.StatusDeleted
			default:
				return nil, badInput("in: takes inbox, archive or trash, not %q", val)
			}
			// Highlights have no status, and the highlight index cannot be
			// filtered by their item's: refused rather than ignored.
			itemOnly = append(itemOnly, tok)
		case "type":
			switch lval {
			case "article":
				f.Type = storage.TypeArticle
			case "newsletter":
				f.Type = storage.TypeNewsletter
			case "highlight", "highlights":
				s.highlights = true
			default:
				return nil, badInput("type: takes article, newsletter or highlight, not %q", val)
			}
		case "label":
			f.LabelsAll = append(f.LabelsAll, splitList(val))
			itemOnly = append(itemOnly, tok)
		case "-label":
			f.LabelsNot = append(f.LabelsNot, splitList(val)...)
			itemOnly = append(itemOnly, tok)
		case "has", "no":
			v := &yes
			if lkey == "no" {
				v = &no
			}
			switch lval {
			case "highlights":
				f.HasHighlights = v
			case "labels":
				// no:labels means NoLabels is true.
				nl := !*v
				f.NoLabels = &nl
			default:
				return nil, badInput("%s: takes highlights or labels, not %q", lkey, val)
			}
			itemOnly = append(itemOnly, tok)
		case "saved", "updated":
			from, to, err := parseTimeRange(val)
			if err != nil {
				return nil, badInput("%s: %v", lkey, err)
			}
			if lkey == "saved" {
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
			f.ProgressFrom, f.ProgressTo = from, to
			itemOnly = append(itemOnly, tok)
		case "reading-time":
			from, to, err := parseNumberRange(val)
			if err != nil {
				return nil, badInput("reading-time: %v", err)
			}
			if from != nil {
				m := int(*from)
				f.MinutesFrom = &m
			}
			if to != nil {
				m := int(*to)
				f.MinutesTo = &m
			}
			itemOnly = append(itemOnly, tok)
		case "sort":
			o, err := parseSortValue(lval)
			if err != nil {
				return nil, err
			}
			s.sort = o
		}
	}
	if s.highlights && len(itemOnly) > 0 {
		return nil, badInput("%s cannot be combined with type:highlight: it filters saved items, and highlights are listed from every item", itemOnly[0])
	}
	f.Text = strings.Join(text, " ")
	return s, nil
}

func knownOperator(key string) bool {
	switch key {
	case "in", "type", "label", "-label", "has", "no", "saved", "updated", "site", "progress", "reading-time", "sort":
		return true
	}
	return false
}

func parseSortValue(v string) (*sortOrder, error) {
	name, dir := v, ""
	if i := strings.LastIndexByte(v, '-'); i > 0 {
		name, dir = v[:i], v[i+1:]
	}
	field, ok := sortNames[name]
	if !ok {
		return nil, badInput("sort: takes saved, updated, title, wordCount or readingProgress, not %q", name)
	}
	o := &sortOrder{field: field, desc: field != storage.SortTitle}
	switch dir {
	case "":
	case "asc":
		o.desc = false
	case "desc":
		o.desc = true
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
// date is that day.
func parseTimeRange(v string) (from, to *time.Time, err error) {
	a, b, isRange := strings.Cut(v, "..")
	if !isRange {
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
