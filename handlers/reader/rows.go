package reader

import (
	"bytes"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
)

// writeItems writes the list of a library page's items, written in Go as
// the rest of the page (writeLibrary): the list is most of the page, and a
// template's reflection over 50 rows was most of the page's time. Every
// value is escaped as html/template escapes text and quoted attributes;
// URLs are this site's paths built by listState.itemURL.
func writeItems(b *bytes.Buffer, items []itemRow) {
	b.WriteString(`<ul class="items">`)
	for i := range items {
		it := &items[i]
		b.WriteString("\n<li class=\"item")
		if it.Read {
			b.WriteString(" read")
		}
		b.WriteString("\">\n<input type=\"checkbox\" name=\"id\" value=\"")
		escape(b, it.ID)
		b.WriteString("\" aria-label=\"Select “")
		escape(b, it.Title)
		b.WriteString("”\">\n<div class=\"body\">\n<a class=\"title\" href=\"")
		escape(b, it.URL)
		b.WriteString("\">")
		escape(b, it.Title)
		b.WriteString("</a>\n<p class=\"meta\">")
		if it.Newsletter {
			escape(b, it.Sender)
		} else {
			escape(b, it.Site)
		}
		b.WriteString(" · ")
		writeDate(b, it.Saved, "")
		if it.Minutes != 0 {
			b.WriteString(" · ")
			b.WriteString(strconv.Itoa(it.Minutes))
			b.WriteString(" min")
		}
		if it.Progress != 0 {
			b.WriteString(" · ")
			b.WriteString(strconv.Itoa(it.Progress))
			b.WriteString("% read")
		}
		if it.Status == "ARCHIVED" {
			b.WriteString(" · archived")
		}
		b.WriteString("</p>")
		if len(it.Labels) > 0 {
			b.WriteString("\n<ul class=\"labels\" aria-label=\"Labels\">")
			for _, l := range it.Labels {
				b.WriteString("<li>")
				escape(b, l)
				b.WriteString("</li>")
			}
			b.WriteString("</ul>")
		}
		b.WriteString("\n</div>\n</li>")
	}
	b.WriteString("\n</ul>")
}

// writeDate writes t as a <time> element: in UTC, RFC 3339 for machines,
// label and "2 Jan 2006" for people.
func writeDate(b *bytes.Buffer, t time.Time, label string) {
	var date [32]byte
	t = t.UTC()
	b.WriteString(`<time datetime="`)
	b.Write(t.AppendFormat(date[:0], time.RFC3339))
	b.WriteString(`">`)
	b.WriteString(label)
	b.Write(t.AppendFormat(date[:0], "2 Jan 2006"))
	b.WriteString("</time>")
}

// escape writes s escaped as html/template escapes text and quoted
// attribute values.
func escape(w io.Writer, s string) { account.WriteEscaped(w, s) }

// navHTML writes the library's menu of views: the fixed views, then the
// labels' and the saved searches', each a list of links (the current one
// marked), as writeItems writes the items and for the same reason.
func navHTML(fixed, labels, queries []menuLink) template.HTML {
	var b strings.Builder
	b.Grow(128 * (len(fixed) + len(labels) + len(queries)))
	links := func(l []menuLink) {
		for _, m := range l {
			b.WriteString("\n<li><a href=\"")
			escape(&b, m.URL)
			b.WriteString("\"")
			if m.Current {
				b.WriteString(` aria-current="page"`)
			}
			b.WriteString(">")
			escape(&b, m.Name)
			b.WriteString("</a></li>")
		}
		b.WriteString("\n</ul>")
	}
	b.WriteString("<ul>")
	links(fixed)
	if len(labels) > 0 {
		b.WriteString("\n<p class=\"navhead\" id=\"labels-head\">Labels</p>\n<ul aria-labelledby=\"labels-head\">")
		links(labels)
	}
	if len(queries) > 0 {
		b.WriteString("\n<p class=\"navhead\" id=\"queries-head\">Saved searches</p>\n<ul aria-labelledby=\"queries-head\">")
		links(queries)
	}
	return template.HTML(b.String())
}

// sortsHTML writes the options of the sort menu, current selected.
func sortsHTML(current string) template.HTML {
	var b strings.Builder
	for _, s := range sorts {
		b.WriteString(`<option value="`)
		escape(&b, s.Value)
		b.WriteString(`"`)
		if s.Value == current {
			b.WriteString(" selected")
		}
		b.WriteString(">")
		escape(&b, s.Label)
		b.WriteString("</option>")
	}
	return template.HTML(b.String())
}

// prefsHTML writes the menus of the text settings, as writeItems writes the
// library's items: five menus of up to six choices were most of the reader
// page's template actions.
func prefsHTML(menus []prefSelect) template.HTML {
	var b strings.Builder
	b.Grow(1500)
	for _, m := range menus {
		b.WriteString(`<p><label for="pref-`)
		escape(&b, m.Name)
		b.WriteString(`">`)
		escape(&b, m.Label)
		b.WriteString(`</label><select id="pref-`)
		escape(&b, m.Name)
		b.WriteString(`" name="`)
		escape(&b, m.Name)
		b.WriteString(`">`)
		for _, o := range m.Options {
			b.WriteString(`<option value="`)
			escape(&b, o.Value)
			b.WriteString(`"`)
			if o.Selected {
				b.WriteString(" selected")
			}
			b.WriteString(">")
			escape(&b, o.Label)
			b.WriteString("</option>")
		}
		b.WriteString("\n</select></p>\n")
	}
	return template.HTML(b.String())
}
