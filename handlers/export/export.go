package export

import (
	"archive/zip"
	"bufio"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Paths and title of the export settings page.
const (
	PagePath  = "/settings/export"
	FilePath  = PagePath + "/hearth-export.zip"
	PageTitle = "Export"
	// APIPath serves the same zip to an API token (or an OAuth token
	// with read, or the session), for tools that back a library up.
	APIPath = "/api/export"
)

//go:embed templates/export.html
var templates embed.FS

var exportTmpl = template.Must(template.New("export.html").ParseFS(templates, "templates/export.html"))

// Page returns the "Export" settings page: GET PagePath explains the
// export, GET FilePath streams a zip of everything the member saved
// (saved_items.json, labels.json, markdown/*.md). The zip is written while
// it downloads, from one consistent snapshot per pass, so libraries of any
// size never sit in memory.
func (x *Exports) Page(pages *account.Pages) account.SettingsPage {
	sp := pages.MemberPage(PagePath, PageTitle, func(w http.ResponseWriter, r *http.Request, m *members.Member) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET")
			http.Error(w, "This page can only be opened.", http.StatusMethodNotAllowed)
			return
		}
		switch r.URL.Path {
		case PagePath:
			pages.Render(w, r, http.StatusOK, PageTitle, exportTmpl, struct{ Download, Book, Feeds string }{FilePath, EPUBPath, account.APITokensPath + "#feeds"})
		case FilePath:
			x.serveExport(w, r, m)
		default:
			pages.NotFound(w, r)
		}
	})
	sp.Subpaths = true // the zip, FilePath
	return sp
}

// exportRetryAfter is the Retry-After of an export refused while the
// member's previous one is still being written.
const exportRetryAfter = 30

func (x *Exports) serveExport(w http.ResponseWriter, r *http.Request, m *members.Member) {
	api := r.URL.Path == APIPath
	fail := func(status int, msg string) {
		if api {
			writeRESTError(w, r, status, msg)
		} else {
			http.Error(w, msg, status)
		}
	}
	// An export reads the whole library: a member's exports run one after
	// the other (a second one while the first downloads is refused, not
	// queued), so that a client repeating its request cannot make this
	// process read the library many times at once.
	key := exportKey{x.store, m.ID, false}
	if _, busy := exporting.LoadOrStore(key, struct{}{}); busy {
		w.Header().Set("Retry-After", strconv.Itoa(exportRetryAfter))
		fail(http.StatusTooManyRequests, "Your previous export is still being downloaded; try again once it has finished.")
		return
	}
	defer exporting.Delete(key)
	labels, names, err := x.exportLabels(r.Context(), m.ID)
	if err != nil {
		if status, _, ok := inboxtapi.Refusal(w, err); ok {
			fail(status, "The export cannot run now ("+err.Error()+"); try again later.")
			return
		}
		x.log.Error("export: labels", zap.Error(err))
		fail(http.StatusInternalServerError, "The export could not be started; try again.")
		return
	}
	name := FileName(m, x.now())
	h := w.Header()
	h.Set("Content-Type", "application/zip")
	h.Set("Content-Disposition", `attachment; filename="`+name+`"`)
	h.Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		return
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	zw, err := newSpoolZip(bw)
	if err != nil {
		x.log.Error("export: spool file", zap.Error(err))
		fail(http.StatusInternalServerError, "The export could not be started; try again.")
		return
	}
	defer zw.Abort()
	err = x.writeExport(r.Context(), zw, m, labels, names)
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		// The status line is gone: an incomplete zip is what the client
		// gets, and zip readers refuse it.
		x.log.Warn("export interrupted", zap.String("member", m.Username), zap.Error(err))
	}
}

// FileName names the export zip of m made at now.
func FileName(m *members.Member, now time.Time) string {
	return fmt.Sprintf("hearth-export-%s-%s.zip", m.Username, now.UTC().Format("2006-01-02"))
}

// WriteZip writes the Export page's zip of m's library to w.
func (x *Exports) WriteZip(ctx context.Context, w io.Writer, m *members.Member) error {
	labels, names, err := x.exportLabels(ctx, m.ID)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(w)
	if err := x.writeExport(ctx, zw, m, labels, names); err != nil {
		return err
	}
	return zw.Close()
}

// exportLabels returns the member's labels and their names by id, which
// an export reads before it writes anything.
func (x *Exports) exportLabels(ctx context.Context, memberID string) ([]*library.Label, map[string]string, error) {
	labels, err := library.Of(x.store).Labels(ctx, memberID)
	if err != nil {
		return nil, nil, err
	}
	names := make(map[string]string, len(labels))
	for _, l := range labels {
		names[l.ID] = l.Name
	}
	return labels, names, nil
}

// zipEntries is what writeExport writes to: spoolZip, whose directory is
// not held in memory.
type zipEntries interface {
	CreateHeader(fh *zip.FileHeader) (io.Writer, error)
}

func (x *Exports) writeExport(ctx context.Context, zw zipEntries, m *members.Member, labels []*library.Label, names map[string]string) error {
	now := x.now()
	f, err := zw.CreateHeader(zipHeader("labels.json", now))
	if err != nil {
		return err
	}
	if labels == nil {
		labels = []*library.Label{}
	}
	enc := json.NewEncoder(f)
	enc.SetIndent("", "  ")
	if err := enc.Encode(labels); err != nil {
		return err
	}

	// saved_items.json, streamed as one JSON array.
	f, err = zw.CreateHeader(zipHeader("saved_items.json", now))
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, "["); err != nil {
		return err
	}
	first := true
	err = library.Of(x.store).ForEachSavedItem(ctx, m.ID, func(it *library.SavedItem, c *library.ItemContent) error {
		e, err := x.exportItem(ctx, m.ID, it, c, names)
		if err != nil {
			return err
		}
		if e.Images, err = x.exportImageList(ctx, m.ID, it); err != nil {
			return err
		}
		b, err := json.MarshalIndent(e, "  ", "  ")
		if err != nil {
			return err
		}
		sep := ",\n  "
		if first {
			sep, first = "\n  ", false
		}
		if _, err := io.WriteString(f, sep); err != nil {
			return err
		}
		_, err = f.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, "\n]\n"); err != nil {
		return err
	}

	// One Markdown file per item.
	md := newMarkdownConverter()
	n := 0
	return library.Of(x.store).ForEachSavedItem(ctx, m.ID, func(it *library.SavedItem, c *library.ItemContent) error {
		e, err := x.exportItem(ctx, m.ID, it, c, names)
		if err != nil {
			return err
		}
		n++
		files, err := x.writeExportImages(ctx, zw, m.ID, it)
		if err != nil {
			return err
		}
		e.ContentHTML = articles.RewriteImages(e.ContentHTML, it.OriginalURL, files)
		f, err := zw.CreateHeader(zipHeader(fmt.Sprintf("markdown/%05d-%s.md", n, Slug(it.Title, it.ID)), it.UpdatedAt))
		if err != nil {
			return err
		}
		return writeMarkdown(f, e, md)
	})
}

// exportImagesBase stands for the export's root in the addresses of
// images while their item's HTML becomes Markdown (the converter makes
// relative addresses absolute against the item's URL); markdownImages
// turns it back into the path from markdown/.
const exportImagesBase = "https://hearth-export.invalid/"

// exportImageList lists the item's stored images for saved_items.json:
// the address its content names each by, and its file in the zip (as
// writeExportImages names it), so that an import links each file to its
// image again.
func (x *Exports) exportImageList(ctx context.Context, memberID string, it *library.SavedItem) ([]importer.HearthImage, error) {
	list, err := library.Of(x.store).ItemImages(ctx, memberID, it.ID)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	out := make([]importer.HearthImage, len(list))
	for n, img := range list {
		out[n] = importer.HearthImage{URL: img.URL, File: exportImageFile(it.ID, n, img)}
	}
	return out, nil
}

// exportImageFile is the file of the item's n-th image in the zip.
func exportImageFile(itemID string, n int, img library.ItemImage) string {
	return fmt.Sprintf("images/%s/%d.%s", itemID, n, library.ImageExt(img.Type))
}

// writeExportImages writes the item's stored images into the export, as
// images/<item id>/<n>.<ext>, one read at a time, and returns their
// addresses for its Markdown by the address its content names them by.
func (x *Exports) writeExportImages(ctx context.Context, zw zipEntries, memberID string, it *library.SavedItem) (map[string]string, error) {
	files := map[string]string{}
	err := library.Of(x.store).ForEachItemImage(ctx, memberID, it.ID, func(n int, img library.ItemImage, data []byte) error {
		name := exportImageFile(it.ID, n, img)
		// Stored as they are: images are compressed already.
		f, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store, Modified: it.UpdatedAt.UTC()})
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			return err
		}
		files[img.URL] = exportImagesBase + name
		return nil
	})
	return files, err
}

func (x *Exports) exportItem(ctx context.Context, memberID string, it *library.SavedItem, c *library.ItemContent, names map[string]string) (*importer.HearthItem, error) {
	e := &importer.HearthItem{
		ID: it.ID, Type: it.Type, Status: it.Status, Title: it.Title, URL: it.OriginalURL,
		SourceDomain: it.SourceDomain, Description: it.Description, Author: it.Author, LeadImage: it.LeadImage,
		WordCount: it.WordCount, ReadingProgress: it.ReadingProgress, ReadAt: it.ReadAt,
		CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt, Labels: []string{}, Highlights: []importer.HearthHighlight{},
		ContentHTML: c.HTML, ContentText: c.Text,
	}
	for _, id := range it.LabelIDs {
		if n, ok := names[id]; ok {
			e.Labels = append(e.Labels, n)
		}
	}
	if it.HighlightCount > 0 {
		hs, err := library.Of(x.store).ItemHighlights(ctx, memberID, it.ID)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			e.Highlights = append(e.Highlights, importer.HearthHighlight{
				ID: h.ID, Text: HighlightText(h), Note: h.Note, Segments: h.Segments, CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt,
			})
		}
	}
	return e, nil
}

// zipHeader is a compressed zip entry dated t (zip.Writer.Create dates
// every entry 1980: archive tools then show the item's date, and sort by
// it).
func zipHeader(name string, t time.Time) *zip.FileHeader {
	return &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: t.UTC()}
}

// HighlightText is the highlighted text of all segments.
func HighlightText(h *library.Highlight) string {
	parts := make([]string, 0, len(h.Segments))
	for _, s := range h.Segments {
		if s.Text != "" {
			parts = append(parts, s.Text)
		}
	}
	return strings.Join(parts, " ")
}

// newMarkdownConverter turns an item's HTML into CommonMark (headings,
// lists, links, emphasis, quotes, code) with GitHub's tables and
// strikethrough, through html-to-markdown (JohannesKaufmann/html-to-markdown).
func newMarkdownConverter() *converter.Converter {
	return converter.NewConverter(converter.WithPlugins(base.NewBasePlugin(), commonmark.NewCommonmarkPlugin(),
		table.NewTablePlugin(), strikethrough.NewStrikethroughPlugin()))
}

// contentMarkdown is the item's content as Markdown, its links made
// absolute against its address; its readable text when it has no HTML or
// the HTML cannot be converted.
func contentMarkdown(md *converter.Converter, e *importer.HearthItem) string {
	if strings.TrimSpace(e.ContentHTML) != "" {
		var opts []converter.ConvertOptionFunc
		if e.URL != "" {
			opts = append(opts, converter.WithDomain(e.URL))
		}
		if out, err := md.ConvertString(e.ContentHTML, opts...); err == nil && strings.TrimSpace(out) != "" {
			return strings.ReplaceAll(strings.TrimSpace(out), exportImagesBase, "../")
		}
	}
	return strings.TrimSpace(e.ContentText)
}

// writeMarkdown writes an item as Markdown with YAML front matter, the
// highlights (as quotes, with notes) and the content as Markdown.
func writeMarkdown(w io.Writer, e *importer.HearthItem, md *converter.Converter) error {
	bw := bufio.NewWriter(w)
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) } // a YAML-safe quoted string
	fmt.Fprintf(bw, "---\ntitle: %s\n", q(e.Title))
	if e.URL != "" {
		fmt.Fprintf(bw, "url: %s\n", q(e.URL))
	}
	if e.Author != "" {
		fmt.Fprintf(bw, "author: %s\n", q(e.Author))
	}
	fmt.Fprintf(bw, "type: %s\nstatus: %s\nsaved: %s\n", strings.ToLower(e.Type), strings.ToLower(e.Status), e.CreatedAt.UTC().Format(time.RFC3339))
	if len(e.Labels) > 0 {
		ls := make([]string, len(e.Labels))
		for i, l := range e.Labels {
			ls[i] = q(l)
		}
		fmt.Fprintf(bw, "labels: [%s]\n", strings.Join(ls, ", "))
	}
	fmt.Fprintf(bw, "---\n\n# %s\n\n", heading(e.Title))
	if len(e.Highlights) > 0 {
		bw.WriteString("## Highlights\n\n")
		for _, h := range e.Highlights {
			if t := strings.TrimSpace(h.Text); t != "" { // a note on the item as a whole has none
				for _, line := range strings.Split(t, "\n") {
					fmt.Fprintf(bw, "> %s\n", line)
				}
				bw.WriteString("\n")
			}
			if h.Note != "" {
				fmt.Fprintf(bw, "Note: %s\n\n", h.Note)
			}
		}
	}
	if t := contentMarkdown(md, e); t != "" {
		fmt.Fprintf(bw, "## Content\n\n%s\n", t)
	}
	return bw.Flush()
}

// heading is title as a one-line Markdown heading.
func heading(title string) string {
	if s := articles.OneLine(title); s != "" {
		return s
	}
	return "Untitled"
}

var slugRE = regexp.MustCompile(`[^a-z0-9]+`)

// Slug is a file-name-safe form of title (or id when the title has none).
func Slug(title, id string) string {
	s := strings.Trim(slugRE.ReplaceAllString(strings.ToLower(title), "-"), "-")
	if len(s) > 60 {
		s = strings.TrimRight(s[:60], "-")
	}
	if s == "" {
		return id
	}
	return s
}
