package graphql

import (
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/storage"
)

// ImageAPIPath + "<item id>/<n>" serves the n-th stored image of an item
// (articles.StoredImage) to an API token with read (or the member's
// session); the reader shows the same images under its own path.
const ImageAPIPath = "/api/images/"

// serveImageAPI answers GET ImageAPIPath<item id>/<n>.
func (s *Server) serveImageAPI(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		writeImportError(w, r, http.StatusMethodNotAllowed, "use GET")
		return
	}
	c := s.restCaller(w, r, routeImage, "read an image")
	if c == nil {
		return
	}
	img, data, err := articles.StoredImage(r.Context(), s.store, c.Member.ID, strings.TrimPrefix(r.URL.Path, ImageAPIPath))
	if errors.Is(err, storage.ErrNotFound) {
		writeImportError(w, r, http.StatusNotFound, "no such image")
		return
	}
	if err != nil {
		if status, _, ok := refusal(w, err); ok {
			writeImportError(w, r, status, "the store cannot read an image now; try again later")
			return
		}
		s.log.Error("read an image", zap.Error(err))
		writeImportError(w, r, http.StatusInternalServerError, "internal error; it was logged")
		return
	}
	articles.WriteImage(w, r, img, data)
}

// DefaultImageQuota is the image bytes a member may store (image_quota).
const DefaultImageQuota int64 = 256 << 20
