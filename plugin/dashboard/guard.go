package dashboard

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// cookiePrefix names the cookie that carries the session's token once the
// browser opened the URL with it; the cookie is HttpOnly and
// SameSite=Strict, so no page of another site can send or read it. Its
// name ends with the server's port: browsers keep cookies per host, not per
// port, and two dashboards on one machine must not take each other's.
const cookiePrefix = "torus-dashboard-"

// csp lets the page load only its own scripts, styles, fonts and images,
// and talk only to this server; nothing frames it.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// guard stands in front of every endpoint, as Jupyter's and kubectl
// proxy's do for theirs:
//   - the Host header must name this server as the user reached it
//     (127.0.0.1, localhost or [::1] and its port), so a page whose DNS name
//     was rebound to 127.0.0.1 is refused;
//   - every request but the first page's carries the session's token, in
//     the cookie that page set;
//   - a write must come from this server's own origin, as JSON, which a
//     cross-site form cannot send.
type guard struct {
	token  string
	cookie string
	// hosts are the Host values this server answers to.
	hosts map[string]bool
	next  http.Handler
}

func newGuard(token string, addr net.Addr, next http.Handler) *guard {
	g := &guard{token: token, cookie: cookiePrefix, hosts: map[string]bool{}, next: next}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return g
	}
	port := tcp.AddrPort().Port()
	g.cookie += strconv.Itoa(int(port))
	names := []string{tcp.IP.String()}
	if tcp.IP.IsLoopback() {
		names = append(names, "localhost", "127.0.0.1", "::1")
	}
	for _, n := range names {
		g.hosts[net.JoinHostPort(n, strconv.Itoa(int(port)))] = true
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
	if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet {
		if !g.valid(t) {
			http.Error(w, "this link's token is not this dashboard's: use the URL kubectl mpi dashboard printed", http.StatusForbidden)
			return
		}
		// The token leaves the address bar (and the history) for a cookie.
		http.SetCookie(w, &http.Cookie{Name: g.cookie, Value: g.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		q := r.URL.Query()
		q.Del("token")
		u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
		return
	}
	c, err := r.Cookie(g.cookie)
	if err != nil || !g.valid(c.Value) {
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
