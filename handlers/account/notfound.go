package account

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"sync"
)

// NotFound writes the site's 404 page, in the member pages' look, for a
// path nothing on the site answers. The Caddy handlers call it only when
// nothing later in the site's route wrote a response: without it Caddy ends
// such a request with an empty 200, a blank page that tells a newcomer
// nothing.
func (p *Pages) NotFound(w http.ResponseWriter, r *http.Request) {
	p.Render(w, r, http.StatusNotFound, "Page not found", messageTmpl, message{
		Text:     "Nothing on this site answers " + r.URL.Path + ". Check the address, or start from the home page.",
		LinkHref: "/",
		LinkText: "Go to the home page",
	})
}

// OnlyGet reports whether r is a GET or HEAD, which a page's static file
// (an icon, a script, a stylesheet) answers; to another method it answers
// 405 with Allow, in plain text.
func OnlyGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}

// FaviconPath is where browsers look for a site's icon when its pages name
// none.
const FaviconPath = "/favicon.ico"

// ServeFavicon writes Hearth's icon (an ICO holding one 32×32 PNG: a disc
// in the pages' accent colour). The Caddy handlers serve it only when the
// site has no favicon of its own, so the browser's request for it stops
// ending as a blank answer.
func ServeFavicon(w http.ResponseWriter, r *http.Request) {
	if !OnlyGet(w, r) {
		return
	}
	ico := favicon()
	w.Header().Set("Content-Type", "image/x-icon")
	w.Header().Set("Cache-Control", "public, max-age=86400")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(ico)
	}
}

var favicon = sync.OnceValue(func() []byte {
	const size = 32
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	accent := color.NRGBA{R: 0xa6, G: 0x3f, B: 0x1b, A: 0xff}
	for y := 0; y < size; y++ {
		for x := 0; x < size; x++ {
			dx, dy := float64(x)-15.5, float64(y)-15.5
			if dx*dx+dy*dy <= 15.5*15.5 {
				img.SetNRGBA(x, y, accent)
			}
		}
	}
	var pngData bytes.Buffer
	if err := png.Encode(&pngData, img); err != nil {
		panic(err) // an in-memory image always encodes
	}
	// ICONDIR (reserved, type 1 = icon, one image), then one ICONDIRENTRY
	// pointing at the PNG right after the 22 bytes of headers.
	var ico bytes.Buffer
	_ = binary.Write(&ico, binary.LittleEndian, [3]uint16{0, 1, 1})
	ico.Write([]byte{size, size, 0, 0})
	_ = binary.Write(&ico, binary.LittleEndian, [2]uint16{1, 32})
	_ = binary.Write(&ico, binary.LittleEndian, [2]uint32{uint32(pngData.Len()), 22})
	ico.Write(pngData.Bytes())
	return ico.Bytes()
})

// UnknownHost writes the page for a request that reached the server under
// a host name no site block names: address is the site address to add
// (scheme://host:port, as the request came). Under that name every path
// answers with this page, so its header links nowhere: a sign-in or home
// link would only bring it back.
// Over plain HTTP under a name other than a loopback one, that address
// would serve the pages but no sign-in (the cookie is Secure there), so
// the page says how to serve the name over HTTPS.
func (p *Pages) UnknownHost(w http.ResponseWriter, r *http.Request, address string) {
	text := "This server runs a Hearth site, but not under the name you used. To reach it as " + address +
		", add " + address + " to the site's addresses in the Caddyfile (the line that opens its block, " +
		"names separated by commas) and reload Caddy; otherwise, open it under one of the names listed there."
	if r.TLS == nil && !isLoopbackHost(r.Host) {
		text += " Members could not sign in there, though: browsers keep the sign-in cookie only over HTTPS " +
			"(or on localhost). To sign in under this name, give it a site block of its own with https:// and " +
			"tls internal, as the commented block at the end of Caddyfile.example shows."
	}
	p.render(w, r, http.StatusNotFound, "This site has another name", messageTmpl, message{Text: text}, PageExtras{noLinks: true})
}
