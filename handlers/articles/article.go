package articles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	readability "codeberg.org/readeck/go-readability/v2"
	"golang.org/x/net/html/charset"

	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/handlers/safefetch"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// CheckURL returns rawURL normalised, or what QueueURL would refuse it
// with before any write or network round trip (a caller that makes
// something for the save, such as its labels, asks first).
func (s *Service) CheckURL(rawURL string) (string, error) {
	norm, err := library.NormalizeURL(rawURL)
	if err != nil {
		return "", err
	}
	if err := s.opts.Fetcher.Check(norm); err != nil {
		return "", fetchError(err)
	}
	return norm, nil
}

// Placement is where QueueURL puts the item it saves: the labels it adds,
// its status (the inbox when "") and its saved date (zero: now for a new
// item, the date it has for one saved before), as library.NewItem's
// fields of those names. The item has them from the save on; the fetch
// that follows keeps them.
type Placement struct {
	LabelIDs []string
	Status   string
	SavedAt  time.Time
}

// QueueURL saves a pending item for rawURL (or marks the
// member's item with that URL to be fetched again) and hands it to the
// background fetches: the client's answer does not wait for the site.
// What can be refused without fetching is refused here, storing nothing.
func (s *Service) QueueURL(ctx context.Context, memberID, rawURL string, at Placement) (itemID string, err error) {
	norm, err := s.CheckURL(rawURL)
	if err != nil {
		return "", err
	}
	it, err := library.Of(s.store).QueueFetch(ctx, memberID, library.NewItem{
		URL:         norm,
		Title:       Clip(processingTitlePrefix+norm+"...", library.MaxTitleLen),
		Description: Clip(processingDescription(library.SourceDomain(norm)), library.MaxDescriptionLen),
		LabelIDs:    at.LabelIDs,
		Status:      at.Status,
		SavedAt:     at.SavedAt,
	}, s.private())
	if err != nil {
		return "", err
	}
	s.queuedFetch(ctx, library.PendingFetch{MemberID: memberID, ItemID: it.ID, URL: norm, Private: s.private()})
	return it.ID, nil
}

// fetchArticle fetches norm (a normalised URL) with the safe fetcher and
// extracts the readable article. Its errors are for the member.
func (s *Service) fetchArticle(ctx context.Context, norm string) (*library.NewItem, error) {
	resp, err := s.opts.Fetcher.GetWithHeader(ctx, norm, http.Header{"Accept": {"text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"}})
	if err != nil {
		return nil, fetchError(err)
	}
	if resp.Status >= 400 {
		return nil, &FetchError{fmt.Sprintf("the site answered with HTTP %d", resp.Status)}
	}
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = http.DetectContentType(resp.Body)
	}
	if mt, _, _ := mime.ParseMediaType(ct); mt != "text/html" && mt != "application/xhtml+xml" {
		return nil, inputError("the URL is not an HTML page (it is %s)", mt)
	}
	base := norm
	if resp.FinalURL != "" {
		base = resp.FinalURL
	}
	return articleItem(norm, base, resp.Body, ct)
}

// sentPageReads bounds the pages SaveHTML reads at once in the process, as
// fetchWorkers bounds the fetched ones: readability takes about a second
// of CPU on a page of the fetcher's largest size, and requests that send
// pages at once would otherwise take every core. A request waits for its
// turn only as long as its client does.
var sentPageReads = make(chan struct{}, 2)

// readSentPage is articleItem for a page a client sent, in its turn of
// sentPageReads; a request whose client has left reads nothing.
func readSentPage(ctx context.Context, norm string, page []byte, contentType string) (*library.NewItem, error) {
	var it *library.NewItem
	err := inPageTurn(ctx, func() (err error) {
		it, err = articleItem(norm, norm, page, contentType)
		return err
	})
	return it, err
}

// inPageTurn runs read, a whole page's parse, in its turn of
// sentPageReads; when the client leaves before its turn, read does not
// run and the context's error is returned.
func inPageTurn(ctx context.Context, read func() error) error {
	select {
	case sentPageReads <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-sentPageReads }()
	if err := ctx.Err(); err != nil {
		return err
	}
	return read()
}

// PlaceQuote places h, a highlight a client has just made with its quote
// alone (library.Unplaced), in its item's stored content, and returns h as
// it is then: unplaced when the item has no content yet (its fetch places
// it) or the quote is not found there. Reading and parsing the content (a
// page of up to the fetcher's size) takes a turn of sentPageReads, as a
// page a client sends does.
func (s *Service) PlaceQuote(ctx context.Context, memberID string, h *library.Highlight) (*library.Highlight, error) {
	if !library.Unplaced(h.Segments) {
		return h, nil
	}
	lib := library.Of(s.store)
	placed := false
	err := inPageTurn(ctx, func() error {
		c, err := lib.ItemContent(ctx, memberID, h.SavedItemID)
		if errors.Is(err, storage.ErrNotFound) || err == nil && c.HTML == "" {
			return nil // placed when the page is fetched
		} else if err != nil {
			return err
		}
		placed, err = importer.PlaceQuote(ctx, s.store, memberID, h, c.HTML)
		return err
	})
	if err != nil || !placed {
		return h, err
	}
	return lib.Highlight(ctx, memberID, h.ID)
}

// SaveHTML saves the article of page, HTML the client already has, where
// at says (as QueueURL). The page is held to the size of a page Hearth
// fetches (the fetcher's MaxBytes), so that readability's cost is the same
// bound whichever way the page came; title, when not empty, is the item's
// title (the client's, such as the browser tab's) instead of the one
// readability finds.
func (s *Service) SaveHTML(ctx context.Context, memberID, rawURL, title string, page []byte, contentType string, at Placement) (*library.SavedItem, error) {
	norm, err := library.NormalizeURL(rawURL)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(page)) == 0 {
		return nil, inputError("html must not be empty")
	}
	if limit := s.opts.Fetcher.Options().MaxBytes; int64(len(page)) > limit {
		return nil, inputError("the page is larger than %d bytes", limit)
	}
	in, err := readSentPage(ctx, norm, page, contentType)
	if err != nil {
		return nil, err
	}
	if t := Clip(OneLine(title), library.MaxTitleLen); t != "" {
		in.Title = t
	}
	in.LabelIDs, in.Status, in.SavedAt = at.LabelIDs, at.Status, at.SavedAt
	it, _, err := s.SaveContent(ctx, memberID, *in)
	return it, err
}

// articleItem extracts the article of page, saved under pageURL.
func articleItem(pageURL, baseURL string, page []byte, contentType string) (*library.NewItem, error) {
	a, err := extractArticle(baseURL, page, contentType)
	if err != nil {
		return nil, err
	}
	return &library.NewItem{
		Type:        library.TypeArticle,
		URL:         pageURL,
		Title:       a.title,
		Description: a.description,
		Author:      a.author,
		LeadImage:   a.leadImage,
		WordCount:   a.wordCount,
		HTML:        a.html,
		Text:        a.text,
	}, nil
}

// article is what is kept of a page.
type article struct {
	title, description, author, leadImage string
	html, text                            string
	wordCount                             int
}

// extractArticle runs readability over page (decoded from its charset) and
// keeps the fields a saved item has, cut to the store's limits. Readability
// keeps event handlers, iframes and SVG, so its HTML is sanitised too.
func extractArticle(pageURL string, page []byte, contentType string) (*article, error) {
	u, err := url.Parse(pageURL)
	if err != nil {
		return nil, inputError("url is not valid")
	}
	body, err := charset.NewReader(bytes.NewReader(page), contentType)
	if err != nil {
		body = bytes.NewReader(page)
	}
	ra, err := readability.FromReader(body, u)
	if err != nil {
		return nil, inputError("no readable content could be extracted from the page")
	}
	var content, text strings.Builder
	if err := ra.RenderHTML(&content); err != nil {
		return nil, inputError("no readable content could be extracted from the page")
	}
	if err := ra.RenderText(&text); err != nil {
		return nil, inputError("no readable content could be extracted from the page")
	}
	a := &article{
		title:       Clip(OneLine(ra.Title()), library.MaxTitleLen),
		description: Clip(OneLine(ra.Excerpt()), library.MaxDescriptionLen),
		author:      Clip(OneLine(ra.Byline()), library.MaxAuthorLen),
		html:        SanitizeHTML(content.String()),
		text:        strings.TrimSpace(text.String()),
	}
	a.wordCount = len(strings.Fields(a.text))
	if img, err := u.Parse(ra.ImageURL()); err == nil && ra.ImageURL() != "" && (img.Scheme == "http" || img.Scheme == "https") {
		a.leadImage = img.String()
	}
	if len(a.html)+len(a.text) > library.MaxContentLen {
		return nil, inputError("the article is larger than %d bytes", library.MaxContentLen)
	}
	return a, nil
}

// blockedAddressMessage says why a private address is not fetched, and
// what lifts it: a member reads it, the site's administrator acts on it.
const blockedAddressMessage = "the URL points to a private or reserved network address (such as localhost, 127.0.0.1, 10.x or 192.168.x), " +
	"which this site does not fetch; to save pages from your own network, the site's administrator adds " +
	"allow_private_addresses to hearth_graphql in the Caddyfile"

// FetchError is a page the site did not give (an error status, too slow,
// too many redirects): trying again later may work. Its message is for
// the member (the API's FETCH_FAILED).
type FetchError struct{ Msg string }

func (e *FetchError) Error() string { return e.Msg }

// MemberMessage is what to tell the member about err, when err is the
// member's to fix (a URL refused, a site that failed): the message the API
// would answer with. Other errors (the store's) are not said as they are.
func MemberMessage(err error) (string, bool) {
	var ie *storage.InvalidError
	var ai *InputError
	var af *FetchError
	switch {
	case errors.As(err, &ie):
		return ie.Msg, true
	case errors.As(err, &ai):
		return ai.Msg, true
	case errors.As(err, &af):
		return af.Msg, true
	}
	return "", false
}

// InputError is what cannot be saved whoever tries again (not an HTML
// page, no readable content, too large). Its message is for the member
// (the API's BAD_USER_INPUT).
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputError(format string, a ...any) error {
	return &InputError{fmt.Sprintf(format, a...)}
}

// fetchError turns a fetch failure into a client-facing error.
func fetchError(err error) error {
	switch {
	case errors.Is(err, safefetch.ErrBadURL):
		return storage.InvalidField("url", "url must be an absolute http or https URL")
	case errors.Is(err, safefetch.ErrBlockedAddress):
		return storage.InvalidField("url", "%s", blockedAddressMessage)
	case errors.Is(err, safefetch.ErrTooLarge):
		return storage.InvalidField("url", "the page is too large to save")
	case errors.Is(err, safefetch.ErrRedirect):
		return &FetchError{"the page redirects too many times"}
	case errors.Is(err, safefetch.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return &FetchError{"the site did not answer in time"}
	}
	return &FetchError{"the page could not be fetched"}
}

// OneLine collapses runs of white space to single spaces.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Clip cuts s to at most n characters.
func Clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
