package export

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// ImageAPIPath + "<item id>/<n>" serves the n-th stored image of an item
// (articles.StoredImage) to an API token with read (or the member's
// session); the reader shows the same images under its own path.
const ImageAPIPath = "/api/images/"

// ImageRoute is what ImageAPIPath takes: a stored image of an item shows
// what the item holds.
var ImageRoute = access.Route{Name: "GET " + ImageAPIPath, AnyScope: []string{access.Read}, APITokens: true, Sessions: true}

// serveImage answers GET ImageAPIPath<item id>/<n> for m.
func (x *Exports) serveImage(w http.ResponseWriter, r *http.Request, m *members.Member) {
	img, data, err := articles.StoredImage(r.Context(), x.store, m.ID, strings.TrimPrefix(r.URL.Path, ImageAPIPath))
	if errors.Is(err, storage.ErrNotFound) {
		writeRESTError(w, r, http.StatusNotFound, "no such image")
		return
	}
	if err != nil {
		x.restFailed(w, r, err, "read an image", "the store cannot read an image now; try again later", "internal error; it was logged")
		return
	}
	articles.WriteImage(w, r, img, data)
}

// feedImageURL is where a feed's content shows the n-th stored image of an
// item: under the feed's URL up to its secret (feed), the credential a
// feed reader can send, which the access log leaves out with the rest of
// FeedPath.
func feedImageURL(feed, itemID string, n int) string {
	return feed + "/image/" + itemID + "/" + strconv.Itoa(n)
}

// serveFeedImage answers GET FeedPath<secret>/image/<item id>/<n>: a stored
// image of the feed's member's item, with the headers the reader's images
// have, but shown by any site's pages (a web feed reader's), as the
// remote image it stands for would be.
func (x *Exports) serveFeedImage(w http.ResponseWriter, r *http.Request, m *members.Member, rest string) {
	img, data, err := articles.StoredImage(r.Context(), x.store, m.ID, rest)
	if errors.Is(err, storage.ErrNotFound) {
		writeRESTError(w, r, http.StatusNotFound, "no such image")
		return
	}
	if err != nil {
		x.restFailed(w, r, err, "read a feed's image", "the store cannot read an image now; try again later", "internal error; it was logged")
		return
	}
	w.Header().Set("Cross-Origin-Resource-Policy", "cross-origin")
	articles.WriteImage(w, r, img, data)
}
