package account

import "bytes"

// writeLayout writes the shared layout around ld.Body: the head with the
// inlined stylesheet, the copy script and the page's own tags, the site
// header with the member menu (or the sign-in links), and main. It is
// written in Go rather than by a template because every page view runs it:
// the template's actions, each a reflective call, were a tenth of the
// library page's time. Every value from outside is escaped as html/template
// escapes text and quoted attributes (WriteEscaped); CSS, Script, Head and
// Body are trusted HTML built by this process.
func writeLayout(b *bytes.Buffer, ld *layoutData) {
	b.WriteString("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n" +
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"referrer\" content=\"")
	WriteEscaped(b, ld.ReferrerPolicy)
	b.WriteString("\">\n<title>")
	WriteEscaped(b, ld.FullTitle)
	b.WriteString("</title>\n<style>")
	b.WriteString(string(ld.CSS))
	b.WriteString("</style>\n")
	b.WriteString(string(ld.Script))
	b.WriteString("\n")
	b.WriteString(string(ld.Head))
	b.WriteString("\n</head>\n<body>\n<a class=\"skip\" href=\"#main\">Skip to content</a>\n<header class=\"site\">\n")
	if ld.NoLinks {
		b.WriteString("<span class=\"brand\">")
		WriteEscaped(b, ld.SiteName)
		b.WriteString("</span>")
	} else {
		writeHeaderLinks(b, ld)
	}
	b.WriteString("\n</header>\n<main id=\"main\"")
	if ld.Wide {
		b.WriteString(" class=\"wide\"")
	}
	b.WriteString(">\n")
	if ld.Heading {
		b.WriteString("<h1>")
		WriteEscaped(b, ld.Title)
		b.WriteString("</h1>")
	}
	b.WriteString("\n")
	if ld.writeBody != nil {
		ld.writeBody(b)
	} else {
		b.WriteString(string(ld.Body))
	}
	b.WriteString("\n</main>\n</body>\n</html>\n")
}

// writeHeaderLinks writes the site header's links: the site's name to its
// home, then the member menu, or the sign-in links.
func writeHeaderLinks(b *bytes.Buffer, ld *layoutData) {
	b.WriteString("<a class=\"brand\" href=\"/\">")
	WriteEscaped(b, ld.SiteName)
	b.WriteString("</a>\n<nav aria-label=\"Account\">")
	if m := ld.Member; m != nil {
		b.WriteString("\n<details class=\"menu\">\n<summary>")
		if m.DisplayName != "" {
			WriteEscaped(b, m.DisplayName)
		} else {
			WriteEscaped(b, m.Username)
		}
		b.WriteString(" <span class=\"hint\">@")
		WriteEscaped(b, m.Username)
		b.WriteString("</span></summary>\n<ul>")
		writeMenu(b, ld)
		b.WriteString("\n<li><form class=\"inline\" method=\"post\" action=\"/auth/sign_out\"><button class=\"link\" type=\"submit\">Sign out</button></form></li>\n</ul>\n</details>")
	} else {
		b.WriteString("\n<ul>\n<li><a href=\"/auth/sign_in\">Sign in</a></li>")
		if ld.OpenRegistration {
			b.WriteString("\n<li><a href=\"/auth/sign_up\">Sign up</a></li>")
		}
		b.WriteString("\n</ul>")
	}
	b.WriteString("\n</nav>")
}
