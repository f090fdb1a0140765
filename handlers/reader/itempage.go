package reader

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/hearthkit/caddy-hearth/handlers/account"
)

// shortcutsHTML is the keyboard shortcuts' dialog (shortcuts.html), the
// same on every page: executed once.
var shortcutsHTML = func() string {
	var b strings.Builder
	if err := helpTmpl.ExecuteTemplate(&b, "shortcuts", nil); err != nil {
		panic(err)
	}
	return b.String()
}()

// writeItem writes the reader page of one item. It is what a template
// would write, written directly, as writeItems writes the library's list:
// the template's actions (a reflective call each) were a third of the
// page's time. Every value is escaped as html/template escapes it in its
// place: text and quoted attributes with escape, URLs in href and action
// with account.WriteURL; Content is the item's sanitised HTML.
func writeItem(b *bytes.Buffer, d *itemData) {
	b.Grow(len(d.Content) + 6<<10)
	b.WriteString(`<div class="`)
	escape(b, d.Classes)
	b.WriteString(`" id="reader" data-id="`)
	escape(b, d.Item.ID)
	b.WriteString(`" data-progress="`)
	escape(b, strconv.FormatFloat(d.Item.ReadingProgress, 'g', -1, 64))
	b.WriteString("\">\n<nav class=\"itemnav\" aria-label=\"Article\">\n<a href=\"")
	account.WriteURL(b, d.ListURL)
	b.WriteString(`" id="back">Back to the list</a>`)
	if d.PrevURL != "" {
		b.WriteString(` <a href="`)
		account.WriteURL(b, d.PrevURL)
		b.WriteString(`" rel="prev" id="prev">Previous</a>`)
	}
	if d.NextURL != "" {
		b.WriteString(` <a href="`)
		account.WriteURL(b, d.NextURL)
		b.WriteString(`" rel="next" id="next">Next</a>`)
	}
	b.WriteString("\n</nav>\n<p class=\"notice\" role=\"status\" id=\"notice\">")
	escape(b, d.Notice)
	b.WriteString("</p>\n<div class=\"toolbar\" role=\"group\" aria-label=\"This article\">\n")
	idAndReturn := func(ret string) {
		b.WriteString(`<form method="post" action="/library/items"><input type="hidden" name="id" value="`)
		escape(b, d.Item.ID)
		b.WriteString(`"><input type="hidden" name="return" value="`)
		escape(b, ret)
		b.WriteString(`">`)
	}
	idAndReturn(d.Self)
	switch {
	case d.Archived:
		b.WriteString(`<button class="secondary" name="action" value="unarchive" type="submit" id="archive">Move to inbox</button>`)
	case d.Trashed:
		b.WriteString(`<button class="secondary" name="action" value="restore" type="submit" id="archive">Restore</button>`)
	default:
		b.WriteString(`<button class="secondary" name="action" value="archive" type="submit" id="archive">Archive</button>`)
	}
	if d.Read {
		b.WriteString(`<button class="secondary" name="action" value="unread" type="submit" id="readtoggle">Mark unread</button>`)
	} else {
		b.WriteString(`<button class="secondary" name="action" value="read" type="submit" id="readtoggle">Mark read</button>`)
	}
	b.WriteString("\n</form>")
	if !d.Trashed {
		b.WriteString("\n")
		idAndReturn(d.ListURL)
		b.WriteString(`<button class="secondary" name="action" value="trash" type="submit" id="trash">Move to trash</button></form>`)
	}
	b.WriteString("\n</div>\n<div class=\"readgrid\">\n<article class=\"article\" aria-labelledby=\"title\">\n<header>\n<h1 id=\"title\">")
	escape(b, d.Title)
	b.WriteString("</h1>\n<p class=\"meta\">")
	source := d.Sender
	if source == "" {
		source = d.Site
	}
	// A newsletter's author is mostly its sender: said once.
	if d.Item.Author != "" && !strings.EqualFold(strings.TrimSpace(d.Item.Author), source) {
		b.WriteString("<span>By ")
		escape(b, d.Item.Author)
		b.WriteString("</span> · ")
	}
	b.WriteString("<span>")
	escape(b, source)
	b.WriteString("</span> · ")
	writeDate(b, d.Saved, "Saved ")
	if d.Minutes != 0 {
		b.WriteString(" · <span>")
		b.WriteString(strconv.Itoa(d.Minutes))
		b.WriteString(" min read</span>")
	}
	if d.Progress != 0 {
		b.WriteString(" · <span>")
		b.WriteString(strconv.Itoa(d.Progress))
		b.WriteString("% read</span>")
	}
	if u := d.Item.OriginalURL; u != "" {
		b.WriteString(` · <a href="`)
		account.WriteURL(b, u)
		b.WriteString(`" rel="noopener noreferrer">Original</a>`)
	}
	b.WriteString("</p>\n</header>\n<div class=\"content\" id=\"content\">")
	b.WriteString(string(d.Content))
	b.WriteString("</div>\n</article>\n")
	writeItemSide(b, d)

}

// writeItemSide writes the reader page's side panel: the item's labels,
// its highlights with their notes, and the text settings.
func writeItemSide(b *bytes.Buffer, d *itemData) {
	b.WriteString("<aside class=\"side\" aria-label=\"Labels, highlights and text settings\">\n" +
		"<section aria-labelledby=\"labels-title\">\n<h2 id=\"labels-title\">Labels</h2>\n" +
		"<form method=\"post\" action=\"/library/items\" id=\"labels-form\">\n<input type=\"hidden\" name=\"id\" value=\"")
	escape(b, d.Item.ID)
	b.WriteString(`"><input type="hidden" name="return" value="`)
	escape(b, d.Self)
	b.WriteString(`"><input type="hidden" name="action" value="labels">`)
	if len(d.Labels) > 0 {
		b.WriteString("\n<fieldset><legend class=\"visually-hidden\">Labels of this article</legend>")
		for _, l := range d.Labels {
			b.WriteString("\n<p class=\"check\"><input type=\"checkbox\" name=\"label\" value=\"")
			escape(b, l.ID)
			b.WriteString(`" id="label-`)
			escape(b, l.ID)
			b.WriteString(`"`)
			if l.Checked {
				b.WriteString(" checked")
			}
			b.WriteString(`><label for="label-`)
			escape(b, l.ID)
			b.WriteString(`">`)
			escape(b, l.Name)
			b.WriteString("</label></p>")
		}
		b.WriteString("\n</fieldset>")
	}
	b.WriteString("\n<p><label for=\"new-label\">New label</label><input type=\"text\" id=\"new-label\" name=\"new_label\" maxlength=\"")
	b.WriteString(strconv.Itoa(d.MaxLabel))
	b.WriteString("\"></p>\n<button class=\"secondary\" type=\"submit\">Save labels</button>\n</form>\n</section>\n" +
		"<section id=\"highlights\" aria-labelledby=\"hl-title\">\n<h2 id=\"hl-title\">Highlights</h2>\n" +
		"<p class=\"hint\" id=\"hl-hint\" hidden>Select text in the article, then choose <em>Highlight</em> (or press <kbd>h</kbd>).</p>\n" +
		"<ul class=\"hls\" id=\"hl-list\">")
	for _, hl := range d.Highlights {
		b.WriteString("\n<li id=\"hl-")
		escape(b, hl.ID)
		b.WriteString(`" data-highlight="`)
		escape(b, hl.ID)
		b.WriteString(`" data-segments="`)
		escape(b, hl.Segments)
		b.WriteString("\">\n")
		if hl.Quote != "" {
			// A note on the item as a whole (Omnivore's browser
			// extension writes one) has no quote: its note is all.
			b.WriteString("<blockquote>")
			escape(b, hl.Quote)
			b.WriteString("</blockquote>\n")
		}
		hlForm := func(class, action string) {
			b.WriteString(`<form method="post" action="/library/highlight/`)
			account.WriteURL(b, hl.ID)
			b.WriteString(`" class="`)
			b.WriteString(class)
			b.WriteString("\">\n<input type=\"hidden\" name=\"action\" value=\"")
			b.WriteString(action)
			b.WriteString(`"><input type="hidden" name="return" value="`)
			escape(b, d.Self)
			b.WriteString("\">\n")
		}
		hlForm("note-form", "note")
		b.WriteString(`<label for="note-`)
		escape(b, hl.ID)
		b.WriteString("\">Note</label>\n<textarea id=\"note-")
		escape(b, hl.ID)
		b.WriteString(`" name="note" rows="2" maxlength="10000">`)
		escape(b, hl.Note)
		b.WriteString("</textarea>\n<button class=\"secondary\" type=\"submit\">Save note</button>\n</form>\n")
		hlForm("delete-form", "delete")
		b.WriteString("<button class=\"link\" type=\"submit\">Delete highlight</button>\n</form>\n</li>")
	}
	b.WriteString("\n</ul>\n</section>\n<section aria-labelledby=\"text-title\">\n<h2 id=\"text-title\">Text</h2>\n" +
		"<form method=\"post\" action=\"/library/prefs\" id=\"prefs\">\n<input type=\"hidden\" name=\"return\" value=\"")
	escape(b, d.Self)
	b.WriteString("\">\n")
	b.WriteString(string(d.PrefsHTML))
	b.WriteString("\n<button class=\"secondary\" type=\"submit\">Save text settings</button>\n</form>\n</section>\n</aside>\n</div>\n</div>\n")
	b.WriteString(shortcutsHTML)
	b.WriteString("\n")
}
