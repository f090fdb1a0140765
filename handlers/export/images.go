package export

import (
	"errors"
	"net/http"
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
