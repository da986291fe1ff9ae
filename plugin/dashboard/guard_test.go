package dashboard

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGuard(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8123}
	reached := 0
	g := newGuard(token, addr, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached++
		w.WriteHeader(http.StatusOK)
	}))
	cookie := &http.Cookie{Name: "torus-dashboard-8123", Value: token}
	tests := []struct {
		name     string
		method   string
		url      string
		host     string
		cookie   *http.Cookie
		origin   string
		ctype    string
		body     string
		want     int
		location string
	}{
		{name: "the printed URL trades its token for a cookie and leaves the address bar", method: "GET", url: "/?token=" + token, host: "127.0.0.1:8123", want: http.StatusSeeOther, location: "/"},
		{name: "localhost is this server too", method: "GET", url: "/?token=" + token, host: "localhost:8123", want: http.StatusSeeOther, location: "/"},
		{name: "a wrong token", method: "GET", url: "/?token=nope", host: "127.0.0.1:8123", want: http.StatusForbidden},
		{name: "no token, no cookie", method: "GET", url: "/api/jobs", host: "127.0.0.1:8123", want: http.StatusUnauthorized},
		{name: "another dashboard's cookie", method: "GET", url: "/api/jobs", host: "127.0.0.1:8123", cookie: &http.Cookie{Name: "torus-dashboard-9999", Value: token}, want: http.StatusUnauthorized},
		{name: "a wrong cookie", method: "GET", url: "/api/jobs", host: "127.0.0.1:8123", cookie: &http.Cookie{Name: "torus-dashboard-8123", Value: "x"}, want: http.StatusUnauthorized},
		{name: "a read with the cookie", method: "GET", url: "/api/jobs", host: "127.0.0.1:8123", cookie: cookie, want: http.StatusOK},
		{name: "a name rebound to loopback (DNS rebinding)", method: "GET", url: "/api/jobs", host: "evil.example:8123", cookie: cookie, want: http.StatusMisdirectedRequest},
		{name: "another port", method: "GET", url: "/api/jobs", host: "127.0.0.1:9999", cookie: cookie, want: http.StatusMisdirectedRequest},
		{name: "a write from this origin, as JSON", method: "POST", url: "/api/namespaces/a/jobs", host: "127.0.0.1:8123", cookie: cookie, origin: "http://127.0.0.1:8123", ctype: "application/json", body: "{}", want: http.StatusOK},
		{name: "a write from another site", method: "POST", url: "/api/namespaces/a/jobs", host: "127.0.0.1:8123", cookie: cookie, origin: "http://evil.example", ctype: "application/json", body: "{}", want: http.StatusForbidden},
		{name: "a write without an origin", method: "DELETE", url: "/api/namespaces/a/jobs/b", host: "127.0.0.1:8123", cookie: cookie, want: http.StatusForbidden},
		{name: "a write as a form, which any site may post", method: "POST", url: "/api/namespaces/a/jobs", host: "127.0.0.1:8123", cookie: cookie, origin: "http://127.0.0.1:8123", ctype: "application/x-www-form-urlencoded", body: "a=b", want: http.StatusUnsupportedMediaType},
		{name: "a token on a write is no way in", method: "POST", url: "/api/namespaces/a/jobs?token=" + token, host: "127.0.0.1:8123", origin: "http://127.0.0.1:8123", ctype: "application/json", body: "{}", want: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := reached
			r := httptest.NewRequest(tt.method, tt.url, strings.NewReader(tt.body))
			r.Host = tt.host
			if tt.cookie != nil {
				r.AddCookie(tt.cookie)
			}
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			if tt.ctype != "" {
				r.Header.Set("Content-Type", tt.ctype)
			}
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d (%s)", w.Code, tt.want, w.Body)
			}
			if passed := reached > before; passed != (tt.want == http.StatusOK) {
				t.Errorf("request reached the handler: %t", passed)
			}
			if got := w.Header().Get("Content-Security-Policy"); !strings.Contains(got, "script-src 'self'") || !strings.Contains(got, "frame-ancestors 'none'") {
				t.Errorf("Content-Security-Policy = %q", got)
			}
			if tt.location != "" {
				if got := w.Header().Get("Location"); got != tt.location {
					t.Errorf("Location = %q, want %q", got, tt.location)
				}
				c := w.Result().Cookies()
				if len(c) != 1 || c[0].Value != token || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
					t.Errorf("cookie = %+v, want the token, HttpOnly, SameSite=Strict", c)
				}
			}
		})
	}
}
