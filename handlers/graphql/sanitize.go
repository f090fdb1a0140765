package graphql

import "github.com/microcosm-cc/bluemonday"

// contentPolicy is what saved content may keep of its HTML: bluemonday's
// policy for user-generated content (formatting, headings, lists, quotes,
// code, links, images, tables; http, https and mailto URLs only, links
// rel="nofollow"). Scripts, styles, event handlers, style attributes,
// iframes, objects, SVG and forms are dropped, and so is the text inside
// script and style elements. A Policy is safe for concurrent use.
var contentPolicy = bluemonday.UGCPolicy()

// sanitizeHTML is the one cleaning of untrusted HTML before it is stored:
// newsletters as received and articles as extracted. The content is later
// shown by clients and exported, so it must be safe to render.
func sanitizeHTML(html string) string {
	return contentPolicy.Sanitize(html)
}
