package dashboard

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// csp lets the page load only its own scripts, styles, fonts and images,
// and talk only to this server; nothing frames it.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// guard stands in front of every endpoint:
//   - the Host header must name this server as the user reached it
//     (127.0.0.1, localhost or [::1] and its port), so a page whose DNS name
//     was rebound to 127.0.0.1 is refused;
//   - every API request carries the session's token in its Authorization
//     header. The page reads the token from the printed URL once and keeps
//     it in its origin's storage (127.0.0.1 and this port only); no cookie
//     carries it, since browsers send a host's cookies to every port of it.
//     A header is also what no other site's page can make a browser send
//     here without this server's consent (CORS), which it never gives;
//   - a write must also come from this server's own origin, as JSON.
//
// The page's files (its script, styles and fonts) hold no data and are
// served to any request that passes the Host check.
type guard struct {
	token string
	// hosts are the Host values this server answers to.
	hosts map[string]bool
	next  http.Handler
}

func newGuard(token string, addr net.Addr, next http.Handler) *guard {
	g := &guard{token: token, hosts: map[string]bool{}, next: next}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return g
	}
	port := strconv.Itoa(int(tcp.AddrPort().Port()))
	names := []string{tcp.IP.String()}
	if tcp.IP.IsLoopback() {
		names = append(names, "localhost", "127.0.0.1", "::1")
	}
	for _, n := range names {
		g.hosts[net.JoinHostPort(n, port)] = true
	}
	return g
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if !g.hosts[strings.ToLower(r.Host)] {
		http.Error(w, "this dashboard answers only at the address kubectl mpi dashboard printed", http.StatusMisdirectedRequest)
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/api/") {
		g.next.ServeHTTP(w, r)
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !g.valid(token) {
		http.Error(w, "open the dashboard with the URL kubectl mpi dashboard printed (it holds this session's token)", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if !g.sameOrigin(r) {
			http.Error(w, "cross-origin writes are refused", http.StatusForbidden)
			return
		}
		if ct := r.Header.Get("Content-Type"); r.ContentLength != 0 && !strings.HasPrefix(ct, "application/json") {
			http.Error(w, "send JSON", http.StatusUnsupportedMediaType)
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

func (g *guard) valid(token string) bool {
	return subtle.ConstantTimeCompare([]byte(token), []byte(g.token)) == 1
}

// sameOrigin: the request's Origin is this server as the browser reached
// it. Browsers send Origin with every write; a request without one is not
// a browser's page and is refused too.
func (g *guard) sameOrigin(r *http.Request) bool {
	o, err := url.Parse(r.Header.Get("Origin"))
	if err != nil || o.Scheme != "http" {
		return false
	}
	return g.hosts[strings.ToLower(o.Host)] && strings.EqualFold(o.Host, r.Host)
}
