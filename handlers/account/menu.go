package account

import (
	"html/template"
	"io"
	"strings"
)

// htmlEscaper escapes as html/template escapes text and quoted attribute
// values (the same characters, the same entities).
var htmlEscaper = strings.NewReplacer("\x00", "\uFFFD", `"`, "&#34;", "'", "&#39;", "&", "&amp;", "+", "&#43;", "<", "&lt;", ">", "&gt;")

// WriteEscaped writes s to w escaped as html/template escapes text and
// quoted attribute values: for the parts of pages written in Go rather
// than by a template (lists on every view, where each template action is a
// call through reflection).
func WriteEscaped(w io.Writer, s string) {
	_, _ = htmlEscaper.WriteString(w, s)
}

// menuHTML is the member menu's links: the site's home (its library) if it
// has one, the settings, the account and each settings page, the current
// page marked; what layout.html wrote with a range, written here.
func menuHTML(home string, ld layoutData) template.HTML {
	var b strings.Builder
	b.Grow(96 * (3 + len(ld.SettingsPages)))
	link := func(path, title string, current bool) {
		b.WriteString("\n<li><a href=\"")
		WriteEscaped(&b, path)
		b.WriteString("\"")
		if current {
			b.WriteString(` aria-current="page"`)
		}
		b.WriteString(">")
		WriteEscaped(&b, title)
		b.WriteString("</a></li>")
	}
	if home != "" {
		link(home, "Library", home == ld.CurrentPath)
	}
	link(SettingsPath, "Settings", ld.OnSettings)
	link(AccountPath, "Account", ld.OnAccount)
	for _, sp := range ld.SettingsPages {
		link(sp.Path, sp.Title, sp.Path == ld.CurrentPath)
	}
	return template.HTML(b.String())
}
