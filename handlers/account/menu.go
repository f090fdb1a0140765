package account

import (
	"bytes"
	"io"
	"strings"
)

// escapes are what html/template writes for the bytes it escapes in text
// and quoted attribute values (the same characters, the same entities).
var escapes = [256]string{0: "\uFFFD", '"': "&#34;", '\'': "&#39;", '&': "&amp;", '+': "&#43;", '<': "&lt;", '>': "&gt;"}

// WriteEscaped writes s to w escaped as html/template escapes text and
// quoted attribute values: for the parts of pages written in Go rather
// than by a template (the layout, the library's pages), where each
// template action is a call through reflection.
func WriteEscaped(w io.Writer, s string) {
	sw, ok := w.(io.StringWriter)
	if !ok {
		sw = stringWriter{w}
	}
	last := 0
	for i := 0; i < len(s); i++ {
		if e := escapes[s[i]]; e != "" {
			_, _ = sw.WriteString(s[last:i])
			_, _ = sw.WriteString(e)
			last = i + 1
		}
	}
	_, _ = sw.WriteString(s[last:])
}

type stringWriter struct{ io.Writer }

func (w stringWriter) WriteString(s string) (int, error) { return io.WriteString(w.Writer, s) }

// WriteURL writes u, a URL in an href or action attribute, as
// html/template writes one: a scheme other than http, https or mailto
// becomes "#ZgotmplZ", bytes a URL may not hold are percent-encoded, and
// the result is escaped as an attribute value.
func WriteURL(w io.Writer, u string) {
	if scheme, _, ok := strings.Cut(u, ":"); ok && !strings.Contains(scheme, "/") &&
		!strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") && !strings.EqualFold(scheme, "mailto") {
		u = "#ZgotmplZ"
	}
	WriteEscaped(w, normalizeURL(u))
}

// normalizeURL percent-encodes the bytes of u that are neither unreserved
// nor reserved in RFC 3986 (and single quotes and parentheses), leaving
// existing escapes: html/template's URL normalizer.
func normalizeURL(u string) string {
	var b []byte
	for i := 0; i < len(u); i++ {
		c := u[i]
		if urlByteOK(c) {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(u)+16), u[:i]...)
		}
		const hex = "0123456789abcdef"
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	if b == nil {
		return u
	}
	return string(b)
}

func urlByteOK(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&*+,/:;=?@[]-._~%", c) >= 0
}

// writeMenu writes the member menu's links: the site's home (its library)
// if it has one, the settings, the account and each settings page, the
// current page marked.
func writeMenu(b *bytes.Buffer, ld *layoutData) {
	link := func(path, title string, current bool) {
		b.WriteString("\n<li><a href=\"")
		WriteEscaped(b, path)
		b.WriteString("\"")
		if current {
			b.WriteString(` aria-current="page"`)
		}
		b.WriteString(">")
		WriteEscaped(b, title)
		b.WriteString("</a></li>")
	}
	if ld.Home != "" {
		link(ld.Home, "Library", ld.Home == ld.CurrentPath)
	}
	link(SettingsPath, "Settings", ld.OnSettings)
	link(AccountPath, "Account", ld.OnAccount)
	for _, sp := range ld.SettingsPages {
		link(sp.Path, sp.Title, sp.Path == ld.CurrentPath)
	}
}
