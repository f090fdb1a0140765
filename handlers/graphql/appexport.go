package graphql

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"io"
	"net/url"
	"strings"

	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// maxExportDataURL bounds the data: URL requestExport answers: Chromium
// refuses URLs longer than 2 MiB (kMaxURLChars), so a longer one would
// download nothing, and the answer is built in memory.
const maxExportDataURL = 2_000_000

// errExportTooLarge stops an export written for a data: URL once it would
// not fit.
var errExportTooLarge = errors.New("the export is too large for a data: URL")

// cappedBuffer is a buffer that refuses to grow past max bytes.
type cappedBuffer struct {
	bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, errExportTooLarge
	}
	return b.Buffer.Write(p)
}

// RequestExport answers as Inboxt's web app downloads: a data: URL whose
// #filename= names the file (export.service.ts exportData, Inboxt/inboxt
// @45f4314; ExportDataModal.tsx downloads only data: answers). HIGHLIGHTS
// is every highlight in the chosen format, as Inboxt's; ALL is the zip of
// the Export settings page (Inboxt queues it and mails a link; Hearth
// sends no mail, and the app cannot open Hearth's pages on its host, whose
// navigations its service worker answers). An export over the size a
// browser takes as a URL is refused with where to get it instead, which
// the app's dialog shows.
func (r *mutationResolver) RequestExport(ctx context.Context, in generated.RequestExportInput) (*string, error) {
	c, err := sessionOnly(ctx)
	if err != nil {
		return nil, err
	}
	var (
		name, mimeType string
		kind           = "highlights"
	)
	buf := &cappedBuffer{max: (maxExportDataURL - 200) / 4 * 3}
	if in.Type == generated.ExportTypeAll {
		kind = "library"
		name, mimeType = export.FileName(c.Member, r.s.opts.Now()), "application/zip"
		err = r.s.exports.WriteZip(ctx, buf, c.Member)
	} else {
		name, mimeType, err = r.s.writeHighlightsExport(ctx, buf, c.Member.ID, in.FormatForHighlights)
	}
	if errors.Is(err, errExportTooLarge) {
		return nil, &userError{codeBadRequest, fmt.Sprintf("Your %s export is over %d MB, more than the app can download. "+
			"Download it from the Export page of this site's settings (%s on Hearth's own address), "+
			"or GET %s with an API token.", kind, buf.max>>20+1, export.PagePath, export.APIPath)}
	}
	if err != nil {
		return nil, err
	}
	u := "data:" + mimeType + ";base64," + base64.StdEncoding.EncodeToString(buf.Bytes()) + "#filename=" + url.PathEscape(name)
	return &u, nil
}

// writeHighlightsExport writes every highlight of the member, oldest
// first, in Inboxt's highlights file for format (export.service.ts
// formatHighlights, renderHighlightsHtml.ts @45f4314): a section per
// highlight with its item's title (linked to its address), the time and
// the text. It returns the file's name and type.
func (s *Server) writeHighlightsExport(ctx context.Context, w io.Writer, memberID string, format generated.ExportHighlightsFormat) (name, mimeType string, err error) {
	ts := s.opts.Now().UTC().Format("20060102_150405")
	ext, mimeType := "html", "text/html; charset=utf-8"
	switch format {
	case generated.ExportHighlightsFormatMarkdown:
		ext, mimeType = "md", "text/markdown; charset=utf-8"
	case generated.ExportHighlightsFormatText:
		ext, mimeType = "txt", "text/plain; charset=utf-8"
	}
	write := func(s string) error { _, err := io.WriteString(w, s); return err }
	if ext == "html" {
		if err := write(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<title>Highlights Export ` + ts + `</title>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<style>
body{font-family:system-ui,sans-serif;line-height:1.5;margin:24px;}
article{max-width:800px;margin:auto;}
section{padding:16px 0;border-bottom:1px solid #eee;}
h3{margin:0 0 6px;}
.meta{color:#666;font-size:0.9em;margin-bottom:8px;}
blockquote{margin:0;padding-left:12px;border-left:3px solid #ddd;white-space:pre-wrap;}
</style>
</head>
<body>
<article>
`); err != nil {
			return "", "", err
		}
	}
	first := true
	err = library.Of(s.store).ForEachHighlight(ctx, memberID, func(h *library.Highlight) error {
		title := h.ItemTitle
		if title == "" {
			title = "Unknown item"
		}
		date := h.CreatedAt.UTC().Format("2006-01-02 15:04") + " UTC"
		text := export.HighlightText(h)
		if h.IsNote() {
			text = h.Note // a note on the item as a whole: its note is its text
		}
		text = strings.ReplaceAll(text, "\n", " ")
		sep := "\n---\n\n"
		if first {
			sep, first = "", false
		}
		switch ext {
		case "txt":
			header := title
			if h.ItemURL != "" {
				header += " · " + h.ItemURL
			}
			return write(sep + header + " · " + date + "\n" + text + "\n")
		case "md":
			line := "### " + title
			if h.ItemURL != "" {
				line = "### [" + title + "](" + h.ItemURL + ")"
			}
			return write(sep + line + "\n_" + date + "_\n\n> " + text + "\n")
		}
		heading := "<h3>" + html.EscapeString(title) + "</h3>"
		if h.ItemURL != "" {
			heading = `<h3><a href="` + html.EscapeString(h.ItemURL) + `">` + html.EscapeString(title) + "</a></h3>"
		}
		return write("<section>\n" + heading + "\n<div class=\"meta\">" + date + "</div>\n<blockquote>" + html.EscapeString(text) + "</blockquote>\n</section>\n")
	})
	if err == nil && ext == "html" {
		err = write("</article>\n</body>\n</html>\n")
	}
	return "highlights_" + ts + "." + ext, mimeType, err
}
