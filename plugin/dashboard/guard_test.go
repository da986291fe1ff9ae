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
	bearer := "Bearer " + token
	tests := []struct {
		name   string
		method string
		url    string
		host   string
		auth   string
		cookie *http.Cookie
		origin string
		ctype  string
		body   string
		want   int
	}{
		{name: "the page's files hold no data", method: "GET", url: "/app.js", host: "127.0.0.1:8123", want: http.StatusOK},
		{name: "the page, by localhost", method: "GET", url: "/", host: "localhost:8123", want: http.StatusOK},
		{name: "an API read without the token", method: "GET", url: "/api/jobs", host: "127.0.0.1:8123", want: http.StatusUnauthorized},
		{name: "an API read with a wrong token", method: "GET", url: "/api/jobs", host: "127.0.0.1:8123", auth: "Bearer nope", want: http.StatusUnauthorized},
		{name: "the token in a cookie, which browsers send to every port of the host, is no way in", method: "GET", url: "/api/jobs", host: "127.0.0.1:8123", cookie: &http.Cookie{Name: "token", Value: token}, want: http.StatusUnauthorized},
		{name: "the token in the query is no way in", method: "GET", url: "/api/jobs?token=" + token, host: "127.0.0.1:8123", want: http.StatusUnauthorized},
		{name: "an API read with the token", method: "GET", url: "/api/jobs", host: "127.0.0.1:8123", auth: bearer, want: http.StatusOK},
		{name: "a name rebound to loopback (DNS rebinding)", method: "GET", url: "/api/jobs", host: "evil.example:8123", auth: bearer, want: http.StatusMisdirectedRequest},
		{name: "the page under a rebound name", method: "GET", url: "/", host: "evil.example:8123", want: http.StatusMisdirectedRequest},
		{name: "another port", method: "GET", url: "/api/jobs", host: "127.0.0.1:9999", auth: bearer, want: http.StatusMisdirectedRequest},
		{name: "a write from this origin, as JSON", method: "POST", url: "/api/namespaces/a/jobs", host: "127.0.0.1:8123", auth: bearer, origin: "http://127.0.0.1:8123", ctype: "application/json", body: "{}", want: http.StatusOK},
		{name: "a write from another site", method: "POST", url: "/api/namespaces/a/jobs", host: "127.0.0.1:8123", auth: bearer, origin: "http://evil.example", ctype: "application/json", body: "{}", want: http.StatusForbidden},
		{name: "a write from another port of this host", method: "POST", url: "/api/namespaces/a/jobs", host: "127.0.0.1:8123", auth: bearer, origin: "http://127.0.0.1:9999", ctype: "application/json", body: "{}", want: http.StatusForbidden},
		{name: "a write without an origin", method: "DELETE", url: "/api/namespaces/a/jobs/b", host: "127.0.0.1:8123", auth: bearer, want: http.StatusForbidden},
		{name: "a write as a form, which any site may post", method: "POST", url: "/api/namespaces/a/jobs", host: "127.0.0.1:8123", auth: bearer, origin: "http://127.0.0.1:8123", ctype: "application/x-www-form-urlencoded", body: "a=b", want: http.StatusUnsupportedMediaType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := reached
			r := httptest.NewRequest(tt.method, tt.url, strings.NewReader(tt.body))
			r.Host = tt.host
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
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
			if len(w.Result().Cookies()) != 0 {
				t.Errorf("set a cookie: %v", w.Result().Cookies())
			}
		})
	}
}
