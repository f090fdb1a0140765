// Package testform fills the forms of Hearth's pages as a browser does,
// for the tests that walk the pages over plain HTTP.
package testform

import (
	"html"
	"net/url"
	"regexp"
)

var (
	formRE   = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)">(.*?)</form>`)
	hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
)

// Fill is what a browser posts for the form of the page body whose action
// is action: its hidden fields as the page sent them, then fields (the
// member's input and the button pressed). ok is false when no form of the
// page posts to action.
func Fill(body, action string, fields url.Values) (form url.Values, ok bool) {
	for _, m := range formRE.FindAllStringSubmatch(body, -1) {
		if html.UnescapeString(m[1]) != action {
			continue
		}
		form = url.Values{}
		for _, h := range hiddenRE.FindAllStringSubmatch(m[2], -1) {
			form.Set(html.UnescapeString(h[1]), html.UnescapeString(h[2]))
		}
		for k, v := range fields {
			form[k] = v
		}
		return form, true
	}
	return nil, false
}
