package export

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
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

// signedImagePath is followed by a member id, an item id, an image's
// number, for an API key its id (apitokens.ImageKey), and the signature
// of them (apitokens.ImageSignature): where content that leaves the site
// for another program shows the item's stored images. The signature, not
// the feed's secret or the API key, is the credential its reader sends,
// so the content reveals no more than the image wherever it goes. One
// route serves the feeds' images and those of Omnivore's content: under
// FeedPath, it is kept out of the access log, its requests counted as
// the feeds' are.
const signedImagePath = FeedPath + "i/"

// ImageLinks says where content that leaves the site shows an item's
// stored images: on Site, at addresses signed with Key
// (signedImagePath), or with Key nil at ImageAPIPath, which takes the
// credentials of the caller the content was made for and carries none.
type ImageLinks struct {
	Site string
	Key  *apitokens.ImageKey
}

// url is the address of the n-th stored image of the member's item,
// signed by signer, that of l.Key (nil without one).
func (l ImageLinks) url(signer *apitokens.ImageSigner, memberID, itemID string, n int) string {
	num := strconv.Itoa(n)
	if signer == nil {
		return l.Site + ImageAPIPath + itemID + "/" + num
	}
	token := ""
	if l.Key.TokenID != "" {
		token = l.Key.TokenID + "/"
	}
	return l.Site + signedImagePath + memberID + "/" + itemID + "/" + num + "/" + token + signer.Sign(memberID, itemID, num)
}

// Files maps the addresses of the stored images of the member's item
// (library.ItemImage.URL) to theirs on the site, for
// articles.RewriteImages: nil when html, the item's content, shows no
// image, without reading the store.
func (l ImageLinks) Files(ctx context.Context, store *storage.Store, memberID, itemID, html string) (map[string]string, error) {
	if !articles.HasTag(html, "img") {
		return nil, nil
	}
	images, err := library.Of(store).ItemImages(ctx, memberID, itemID)
	if err != nil || len(images) == 0 {
		return nil, err
	}
	var signer *apitokens.ImageSigner
	if l.Key != nil {
		signer = l.Key.Signer()
	}
	files := make(map[string]string, len(images))
	for n, img := range images {
		files[img.URL] = l.url(signer, memberID, itemID, n)
	}
	return files, nil
}

// serveSignedImage answers GET
// signedImagePath<member>/<item>/<n>[/<API key id>]/<signature>: a stored
// image of the member's item, with the headers the reader's images have,
// but shown by any site's pages (a web feed reader's, a note-taking
// app's), as the remote image it stands for would be.
func (x *Exports) serveSignedImage(w http.ResponseWriter, r *http.Request) {
	if !x.feedRequest(w, r) {
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, signedImagePath), "/")
	token := ""
	if len(parts) == 5 && parts[3] != "" {
		token = parts[3]
		parts = append(parts[:3], parts[4])
	}
	if len(parts) != 4 {
		writeRESTError(w, r, http.StatusNotFound, "no such image")
		return
	}
	m, err := apitokens.Of(x.store).ImageMember(r.Context(), parts[0], token, parts[1], parts[2], parts[3])
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
		x.restFailed(w, r, err, "read a signed image", "the store cannot read an image now; try again later", "internal error; it was logged")
		return
	}
	w.Header().Set("Cross-Origin-Resource-Policy", "cross-origin")
	articles.WriteImage(w, r, img, data)
}
