package export

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
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

// feedImagePath is followed by a member id, an item id, an image's
// number and the signature of the three (apitokens.FeedImageSignature):
// where a feed's content shows the item's stored images. The signature,
// not the feed's secret, is the credential a feed reader sends, so the
// content reveals no more than the image wherever it goes.
const feedImagePath = FeedPath + "i/"

// feedImageURL is the address of the n-th stored image of an item in the
// feed of site whose secret has digest.
func feedImageURL(site, digest, memberID, itemID string, n int) string {
	num := strconv.Itoa(n)
	return site + feedImagePath + memberID + "/" + itemID + "/" + num + "/" + apitokens.FeedImageSignature(digest, memberID, itemID, num)
}

// serveFeedImage answers GET feedImagePath<member>/<item>/<n>/<signature>:
// a stored image of the member's item, with the headers the reader's
// images have, but shown by any site's pages (a web feed reader's), as the
// remote image it stands for would be.
func (x *Exports) serveFeedImage(w http.ResponseWriter, r *http.Request) {
	if !x.feedRequest(w, r) {
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, feedImagePath), "/")
	if len(parts) != 4 {
		writeRESTError(w, r, http.StatusNotFound, "no such image")
		return
	}
	m, err := apitokens.Of(x.store).FeedImageMember(r.Context(), parts[0], parts[1], parts[2], parts[3])
	if apitokens.Unknown(err) {
		writeRESTError(w, r, http.StatusNotFound, "no such image")
		return
	}
	if err != nil {
		x.feedsFailed(w, r, err)
		return
	}
	img, data, err := articles.StoredImage(r.Context(), x.store, m.ID, parts[1]+"/"+parts[2])
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
