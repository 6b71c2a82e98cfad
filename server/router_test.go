package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The router keeps gorilla/mux's answers for the API's kinds of route:
// exact paths by method, 405 for a path with other methods, 404 for none,
// {name} one segment, [0-9]+ digits only, .* the rest of the path, and a
// route for every method beside one for some.
func TestRouter(t *testing.T) {
	rt := newRouter()
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Route", name)
			w.Header().Set("X-Values", r.PathValue("port")+"|"+r.PathValue("rest")+"|"+r.PathValue("id"))
		})
	}
	rt.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) })
	rt.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(405) })
	var labels []string
	rt.matched = func(r *http.Request, tpl string) { labels = append(labels, tpl) }

	rt.Handle("/proxy/{port:[0-9]+}", named("root")).Methods(http.MethodGet, http.MethodHead)
	rt.Handle("/proxy/{port:[0-9]+}/{rest:.*}", named("path"))
	rt.Handle("/run", named("run")).Methods(http.MethodPost)
	rt.Handle("/files", named("get")).Methods(http.MethodGet, http.MethodHead)
	rt.Handle("/files", named("put")).Methods(http.MethodPut)
	rt.Handle("/mcp", named("mcp-post")).Methods(http.MethodPost)
	rt.Handle("/mcp", named("mcp-other"))
	rt.Handle("/any", named("any-first"))
	rt.Handle("/any", named("any-get")).Methods(http.MethodGet)
	rt.Handle("/watches/{id}/events", named("events")).Methods(http.MethodGet)
	rt.Handle("/watches/{id}", named("watch")).Methods(http.MethodDelete)

	for _, tc := range []struct {
		method, path  string
		code          int
		route, values string
	}{
		{"POST", "/run", 200, "run", "||"},
		{"GET", "/run", 405, "", ""},
		{"POST", "/run/", 404, "", ""},
		{"POST", "/runs", 404, "", ""},
		{"HEAD", "/files", 200, "get", "||"},
		{"PUT", "/files", 200, "put", "||"},
		{"DELETE", "/files", 405, "", ""},
		{"POST", "/mcp", 200, "mcp-post", "||"},
		{"GET", "/mcp", 200, "mcp-other", "||"},
		{"DELETE", "/mcp", 200, "mcp-other", "||"},
		{"GET", "/any", 200, "any-get", "||"},
		{"POST", "/any", 200, "any-first", "||"},
		{"GET", "/proxy/3000", 200, "root", "3000||"},
		{"POST", "/proxy/3000", 405, "", ""},
		{"POST", "/proxy/3000/", 200, "path", "3000||"},
		{"PROPFIND", "/proxy/3000/a/b/c.js", 200, "path", "3000|a/b/c.js|"},
		{"GET", "/proxy/30x0/", 404, "", ""},
		{"GET", "/proxy//", 404, "", ""},
		{"GET", "/proxy/", 404, "", ""},
		{"GET", "/watches/w-1/events", 200, "events", "||w-1"},
		{"DELETE", "/watches/w-1", 200, "watch", "||w-1"},
		{"GET", "/watches/w-1", 405, "", ""},
		{"GET", "/watches/w-1/events/x", 404, "", ""},
		{"GET", "/watches//events", 404, "", ""},
		{"GET", "/nope", 404, "", ""},
	} {
		w := httptest.NewRecorder()
		rt.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		assert.Equal(t, tc.code, w.Code, "%s %s", tc.method, tc.path)
		assert.Equal(t, tc.route, w.Header().Get("X-Route"), "%s %s", tc.method, tc.path)
		assert.Equal(t, tc.values, w.Header().Get("X-Values"), "%s %s", tc.method, tc.path)
	}
	assert.Equal(t, []string{"/run", "/files", "/files", "/mcp", "/mcp", "/mcp", "/any", "/any",
		"/proxy/{port:[0-9]+}", "/proxy/{port:[0-9]+}/{rest:.*}", "/proxy/{port:[0-9]+}/{rest:.*}",
		"/watches/{id}/events", "/watches/{id}"}, labels, "labelled with their templates, matches only")

	tpl, ok := rt.Match(httptest.NewRequest("PUT", "/proxy/8080/x", nil))
	assert.True(t, ok)
	assert.Equal(t, "/proxy/{port:[0-9]+}/{rest:.*}", tpl)
	_, ok = rt.Match(httptest.NewRequest("GET", "/run", nil))
	assert.False(t, ok, "a 405 is no match")
}

// A template with more parameters than match keeps is refused when it is
// registered, not when a request first matches it.
func TestRouterTooManyParameters(t *testing.T) {
	assert.Panics(t, func() { parseTemplate("/a/{b}/{c}/{d}/{e}/{f}") })
	assert.NotPanics(t, func() { parseTemplate("/a/{b}/{c}/{d}/{e:.*}") })
}
