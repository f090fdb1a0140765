package reader

import (
	"bytes"

	"github.com/hearthkit/caddy-hearth/handlers/account"
)

// writeLibrary writes a library page around its list (writeItems): the
// menu of views, the search form, the notice, the selection's toolbar, the
// empty view's hint and the paging links. Written in Go for the reason
// writeItems is; values are escaped as writeItem escapes them.
func writeLibrary(b *bytes.Buffer, d *libraryData) {
	b.Grow(len(d.Items)*560 + len(d.NavHTML) + 8<<10)
	b.WriteString("<div class=\"lib\">\n<nav class=\"views\" aria-label=\"Library\">\n")
	b.WriteString(string(d.NavHTML))
	b.WriteString("\n<p><a class=\"button\" href=\"/library/add\" id=\"add-link\">Add a link</a></p>\n</nav>\n<div class=\"list\">\n<h1>")
	escape(b, d.Heading)
	b.WriteString("</h1>\n<form class=\"search\" role=\"search\" method=\"get\" action=\"/library\">\n<p><label for=\"q\">Search</label>\n" +
		"<input type=\"search\" id=\"q\" name=\"q\" value=\"")
	escape(b, d.State.Q)
	b.WriteString("\" aria-describedby=\"q-help\" maxlength=\"2000\"></p>\n<p><label for=\"sort\">Sort</label>\n<select id=\"sort\" name=\"sort\">\n")
	b.WriteString(string(d.SortsHTML))
	b.WriteString("\n</select></p>\n")
	if d.State.Label != "" {
		b.WriteString("<input type=\"hidden\" name=\"label\" value=\"")
		escape(b, d.State.Label)
		b.WriteString("\">\n")
	}
	b.WriteString("<p class=\"go\"><button type=\"submit\">Search</button></p>\n" +
		"<p class=\"hint\" id=\"q-help\">Words, or filters such as <code>in:archive</code>, <code>label:recipes</code>, " +
		"<code>site:example.org</code>, <code>has:highlights</code>: <a href=\"/library/help\">how to search</a>.</p>\n</form>\n")
	if d.Error != "" {
		b.WriteString("<p class=\"error\" role=\"alert\">")
		escape(b, d.Error)
		b.WriteString("</p>")
	}
	b.WriteString("\n")
	if d.Notice != "" {
		b.WriteString("<div class=\"notice\" role=\"status\" id=\"notice\"><p>")
		escape(b, d.Notice)
		b.WriteString("</p>")
		if d.Undo != "" {
			b.WriteString("\n<form method=\"post\" action=\"/library/items\"><input type=\"hidden\" name=\"action\" value=\"undo\"><input type=\"hidden\" name=\"undo\" value=\"")
			escape(b, d.Undo)
			b.WriteString("\"><input type=\"hidden\" name=\"return\" value=\"")
			escape(b, d.Return)
			b.WriteString("\"><button class=\"secondary\" type=\"submit\" id=\"undo\">Undo</button></form>")
		}
		b.WriteString("\n</div>")
	}
	b.WriteString("\n")
	switch {
	case d.IsHighlights:
		b.WriteString("\n")
		writeHighlightRows(b, d.Highlights)
		b.WriteString("\n")
	case len(d.Items) > 0:
		writeBulkForm(b, d)
		writeItems(b, d.Items)
		b.WriteString("\n</form>\n")
	}
	switch {
	case d.Empty.Inbox:
		b.WriteString("\n<div class=\"empty\"><p><strong>Your inbox is empty.</strong></p>\n" +
			"<p>Save something to read: <a href=\"/library/add\">add a link</a>, use the <a href=\"/settings/saving\">bookmarklet or the share menu</a>, " +
			"Inboxt's browser extension with an <a href=\"/settings/api_tokens\">API token</a>, <a href=\"/settings/import\">import</a> from Pocket, " +
			"Omnivore, Wallabag or Inboxt, or send newsletters to your <a href=\"/settings/api_tokens\">newsletter address</a>. " +
			"Archived items are in the <a href=\"/library?q=in%3Aarchive\">archive</a>.</p></div>")
	case d.Empty.Archive:
		b.WriteString("\n<div class=\"empty\"><p><strong>The archive is empty.</strong></p><p>Items you archive (<em>Archive</em>, or <kbd>e</kbd>) leave the inbox and are kept here.</p></div>")
	case d.Empty.Newsletters:
		b.WriteString("\n<div class=\"empty\"><p><strong>No newsletters in your inbox.</strong></p><p>Have an e-mail forwarding service send your newsletters to your " +
			"<a href=\"/settings/api_tokens\">newsletter address</a>: they appear here.</p></div>")
	case d.Empty.All:
		b.WriteString("\n<div class=\"empty\"><p><strong>Nothing saved yet.</strong></p><p><a href=\"/library/add\">Add a link</a>, use the " +
			"<a href=\"/settings/saving\">bookmarklet or the share menu</a>, or <a href=\"/settings/import\">import</a> what you saved elsewhere.</p></div>")
	case d.Empty.Trash:
		b.WriteString("\n<div class=\"empty\"><p><strong>The trash is empty.</strong></p><p>Items you move to the trash wait here until you delete them for good.</p></div>")
	case d.Empty.Highlights:
		b.WriteString("\n<div class=\"empty\"><p><strong>No highlights yet.</strong></p><p>Open an article, select a passage and choose <em>Highlight</em> (or press <kbd>h</kbd>).</p></div>")
	case d.Empty.Search:
		b.WriteString("\n<div class=\"empty\"><p><strong>Nothing here.</strong></p><p>No saved item")
		if d.State.Label != "" {
			b.WriteString(" with the label “")
			escape(b, d.State.Label)
			b.WriteString("”")
		}
		if d.State.Q != "" {
			b.WriteString(" matches <code>")
			escape(b, d.State.Q)
			b.WriteString("</code>")
		}
		b.WriteString(". Try fewer words or filters (<a href=\"/library/help\">how to search</a>), look in " +
			"<a href=\"/library?q=in%3Aall\">everything</a>, or <a href=\"/library/add\">add a link</a>.</p></div>")
	}
	b.WriteString("\n")
	if d.NextURL != "" || d.FirstURL != "" {
		b.WriteString("\n<nav class=\"pages\" aria-label=\"Pages\">")
		if d.FirstURL != "" {
			b.WriteString("<a href=\"")
			account.WriteURL(b, d.FirstURL)
			b.WriteString("\">First page</a>")
		}
		if d.NextURL != "" {
			b.WriteString("<a href=\"")
			account.WriteURL(b, d.NextURL)
			b.WriteString("\" rel=\"next\" id=\"next-page\">Next page</a>")
		}
		b.WriteString("\n</nav>\n")
	}
	b.WriteString("\n<p class=\"hint keyhint\" hidden>Press <kbd>?</kbd> for keyboard shortcuts.</p>\n</div>\n</div>\n")
	b.WriteString(shortcutsHTML)
	b.WriteString("\n")
}

// writeHighlightRows writes the highlights view's list: each quote with
// its note and the item it is from.
func writeHighlightRows(b *bytes.Buffer, rows []highlightRow) {
	if len(rows) > 0 {
		b.WriteString("\n<ul class=\"hls\">")
		for _, hl := range rows {
			b.WriteString("\n<li>")
			if hl.Quote != "" { // a note on the item as a whole has none
				b.WriteString("<blockquote>")
				escape(b, hl.Quote)
				b.WriteString("</blockquote>")
			}
			if hl.Note != "" {
				b.WriteString("<p class=\"note\">")
				escape(b, hl.Note)
				b.WriteString("</p>")
			}
			b.WriteString("\n<p class=\"meta\"><a href=\"")
			account.WriteURL(b, hl.ItemURL)
			b.WriteString("\">")
			escape(b, hl.ItemTitle)
			b.WriteString("</a> · ")
			writeDate(b, hl.Created, "")
			b.WriteString("</p></li>")
		}
		b.WriteString("\n</ul>\n")
	}
}

// writeBulkForm opens the form around a list of items with its toolbar:
// what may be done to the selected items, in the trash or elsewhere.
func writeBulkForm(b *bytes.Buffer, d *libraryData) {
	b.WriteString("\n<form id=\"bulk\" method=\"post\" action=\"/library/items\">\n<input type=\"hidden\" name=\"return\" value=\"")
	escape(b, d.Return)
	b.WriteString("\">\n<div class=\"toolbar\" role=\"group\" aria-label=\"Selected items\">")
	if d.InTrash {
		b.WriteString("\n<button class=\"secondary\" name=\"action\" value=\"restore\" type=\"submit\">Restore</button>\n" +
			"<details class=\"confirm\"><summary class=\"button secondary\">Delete forever…</summary>\n" +
			"<p>Delete the selected items for good? Their highlights go with them; this can't be undone.</p>\n" +
			"<button class=\"danger\" name=\"action\" value=\"delete\" type=\"submit\">Delete for good</button></details>")
	} else {
		b.WriteString("\n<button class=\"secondary\" name=\"action\" value=\"archive\" type=\"submit\">Archive</button>\n" +
			"<button class=\"secondary\" name=\"action\" value=\"unarchive\" type=\"submit\">Move to inbox</button>\n" +
			"<button class=\"secondary\" name=\"action\" value=\"trash\" type=\"submit\">Move to trash</button>")
	}
	b.WriteString("\n<button class=\"secondary\" name=\"action\" value=\"read\" type=\"submit\">Mark read</button>")
	if len(d.Labels) > 0 {
		b.WriteString("\n<span class=\"labelpick\"><label for=\"bulk-label\">Label</label>\n<select id=\"bulk-label\" name=\"label\">")
		for _, l := range d.Labels {
			b.WriteString("<option value=\"")
			escape(b, l.ID)
			b.WriteString("\">")
			escape(b, l.Name)
			b.WriteString("</option>")
		}
		b.WriteString("\n</select>\n<button class=\"secondary\" name=\"action\" value=\"label-add\" type=\"submit\">Add label</button>\n" +
			"<button class=\"secondary\" name=\"action\" value=\"label-remove\" type=\"submit\">Remove label</button></span>")
	}
	b.WriteString("\n</div>\n")
}
