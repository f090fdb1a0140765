package account

import "strings"

// maxUserAgent bounds how much of a User-Agent header DeviceSummary reads.
const maxUserAgent = 512

// DeviceSummary turns a User-Agent header into a short, plain summary such
// as "Firefox on Android" for the sessions list. It reads at most
// maxUserAgent bytes, recognises common browsers and systems by the tokens
// they send, and otherwise keeps the product token (e.g. "curl"), clipped
// and reduced to printable ASCII. It never returns more than 64 bytes.
func DeviceSummary(ua string) string {
	if len(ua) > maxUserAgent {
		ua = ua[:maxUserAgent]
	}
	browser := firstMatch(ua, []struct{ token, name string }{
		{"Edg/", "Edge"}, {"EdgA/", "Edge"}, {"EdgiOS/", "Edge"},
		{"OPR/", "Opera"}, {"Vivaldi/", "Vivaldi"}, {"SamsungBrowser/", "Samsung Internet"},
		{"Firefox/", "Firefox"}, {"FxiOS/", "Firefox"},
		{"CriOS/", "Chrome"}, {"Chromium/", "Chromium"}, {"HeadlessChrome/", "Headless Chrome"}, {"Chrome/", "Chrome"},
		{"Safari/", "Safari"},
	})
	system := firstMatch(ua, []struct{ token, name string }{
		{"Android", "Android"}, {"iPhone", "iPhone"}, {"iPad", "iPad"}, {"CrOS", "ChromeOS"},
		{"Windows", "Windows"}, {"Macintosh", "macOS"}, {"Mac OS X", "macOS"},
		{"Linux", "Linux"}, {"FreeBSD", "FreeBSD"}, {"OpenBSD", "OpenBSD"},
	})
	switch {
	case browser != "" && system != "":
		return browser + " on " + system
	case browser != "":
		return browser
	}
	product := ua
	if i := strings.IndexAny(product, " /("); i >= 0 {
		product = product[:i]
	}
	product = strings.Map(func(r rune) rune {
		if r < 0x21 || r > 0x7e {
			return -1
		}
		return r
	}, product)
	if len(product) > 40 {
		product = product[:40]
	}
	switch {
	case product != "" && system != "":
		return product + " on " + system
	case product != "":
		return product
	case system != "":
		return "A browser on " + system
	}
	return "Unknown device"
}

func firstMatch(ua string, table []struct{ token, name string }) string {
	for _, e := range table {
		if strings.Contains(ua, e.token) {
			return e.name
		}
	}
	return ""
}
