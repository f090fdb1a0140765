package reader

import (
	"bytes"
	"strings"

	"golang.org/x/net/html"
)

// readerContent is an item's saved HTML as the reader shows it: images
// kept by this site (a path here, or data:) stay; an image of another
// origin is shown as its description, without its address, so the browser
// never asks that origin for it (the page's policy would refuse it too);
// 1×1 images, the tracking pixels of newsletters, are dropped, and so is
// noscript content (hidden behind it). The image
// elements stay in place, so the paths of highlights made elsewhere still
// name the same elements.
func readerContent(src string) string {
	lower := strings.ToLower(src)
	if !strings.Contains(lower, "<img") && !strings.Contains(lower, "<source") && !strings.Contains(lower, "<noscript") {
		return src
	}
	var out bytes.Buffer
	out.Grow(len(src))
	z := html.NewTokenizer(strings.NewReader(src))
	noscript := false
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if noscript {
			// What a page shows without JavaScript: its images too,
			// were the member's JavaScript off.
			if name, _ := z.TagName(); tt == html.EndTagToken && string(name) == "noscript" {
				noscript = false
			}
			continue
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			out.Write(z.Raw())
			continue
		}
		raw := append([]byte(nil), z.Raw()...)
		t := z.Token()
		switch t.Data {
		case "noscript":
			noscript = tt == html.StartTagToken
		case "img":
			if pixel(t) {
				continue
			}
			if localImage(attr(t, "src")) && attr(t, "srcset") == "" {
				out.Write(raw)
				continue
			}
			alt := strings.TrimSpace(attr(t, "alt"))
			if alt == "" {
				alt = "An image of the original page"
			}
			out.WriteString(`<img class="img-missing" alt="Image not stored: ` + html.EscapeString(alt) + `">`)
		case "source":
			// A picture's other sources are other origins' addresses.
			if localImage(attr(t, "src")) && attr(t, "srcset") == "" {
				out.Write(raw)
			}
		default:
			out.Write(raw)
		}
	}
	return out.String()
}

func attr(t html.Token, name string) string {
	for _, a := range t.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// localImage reports whether src is served by this site (a path) or
// carried in the page (data:).
func localImage(src string) bool {
	s := strings.TrimSpace(src)
	return strings.HasPrefix(s, "data:image/") || strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "//")
}

// pixel reports whether an image is a 1×1 (or 0×0) tracking pixel.
func pixel(t html.Token) bool {
	w, h := strings.TrimSuffix(attr(t, "width"), "px"), strings.TrimSuffix(attr(t, "height"), "px")
	small := func(v string) bool { return v == "0" || v == "1" }
	return small(w) && small(h)
}
