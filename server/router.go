package server

import (
	"net/http"
	"strconv"
	"strings"
)

// router sends a request to the handler its path and method name: a path
// that a route has, but not for the method, is MethodNotAllowedHandler's;
// a path that none has, NotFoundHandler's. Exact paths are found in a
// map; templates with parameters ("/watches/{id}", "/proxy/{port:[0-9]+}",
// "/proxy/{port:[0-9]+}/{rest:.*}") are tried in the order they were
// registered, and their values are the request's PathValues.
//
// It replaces gorilla/mux, which compiled a regular expression for every
// route: 596 KB allocated at start for 82 routes, half of all the agent
// allocated before it served, and a match per route tried on every
// request. The templates keep mux's spelling, which the metrics' route
// labels and the OpenAPI check read.
type router struct {
	exact    map[string]*pathRoutes
	patterns []*pathRoutes

	NotFoundHandler, MethodNotAllowedHandler http.Handler
	// matched, if set, is called with the template of a route that
	// matched, before its handler.
	matched func(r *http.Request, template string)
}

// pathRoutes are the handlers of one path template.
type pathRoutes struct {
	template string
	segs     []segment // nil for an exact path
	byMethod map[string]http.Handler
	any      http.Handler // for the methods byMethod does not name
}

// segment is one "/"-separated part of a template.
type segment struct {
	lit    string // a literal, if name is ""
	name   string
	digits bool // {name:[0-9]+}
	rest   bool // {name:.*}, the last: the rest of the path, slashes and all
}

func newRouter() *router { return &router{exact: map[string]*pathRoutes{}} }

// routeBuilder is what Handle returns, for Methods.
type routeBuilder struct {
	p       *pathRoutes
	h       http.Handler
	prevAny http.Handler
}

// Handle routes template to h for every method, unless Methods narrows it.
func (rt *router) Handle(template string, h http.Handler) *routeBuilder {
	p := rt.lookup(template)
	b := &routeBuilder{p: p, h: h, prevAny: p.any}
	p.any = h
	return b
}

// Methods narrows b's route to methods.
func (b *routeBuilder) Methods(methods ...string) *routeBuilder {
	b.p.any = b.prevAny
	for _, m := range methods {
		b.p.byMethod[m] = b.h
	}
	return b
}

// lookup returns template's routes, made if new.
func (rt *router) lookup(template string) *pathRoutes {
	segs := parseTemplate(template)
	if segs == nil {
		if p := rt.exact[template]; p != nil {
			return p
		}
		p := &pathRoutes{template: template, byMethod: map[string]http.Handler{}}
		rt.exact[template] = p
		return p
	}
	for _, p := range rt.patterns {
		if p.template == template {
			return p
		}
	}
	p := &pathRoutes{template: template, segs: segs, byMethod: map[string]http.Handler{}}
	rt.patterns = append(rt.patterns, p)
	return p
}

// maxParams bounds the parameters of a template: match keeps their
// values in an array of that size.
const maxParams = 4

// parseTemplate returns template's segments, or nil if it has no
// parameter. A parameter is {name}, one segment; {name:[0-9]+}, one of
// digits; or {name:.*}, the rest of the path. Any other pattern is a
// programming error.
func parseTemplate(template string) []segment {
	if !strings.Contains(template, "{") {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(template, "/"), "/")
	segs := make([]segment, len(parts))
	if strings.Count(template, "{") > maxParams {
		panic("router: more than " + strconv.Itoa(maxParams) + " parameters in " + template)
	}
	for i, part := range parts {
		inner, ok := strings.CutPrefix(part, "{")
		if !ok {
			segs[i].lit = part
			continue
		}
		inner, ok = strings.CutSuffix(inner, "}")
		if !ok {
			panic("router: bad template " + template)
		}
		name, pattern, _ := strings.Cut(inner, ":")
		segs[i].name = name
		switch pattern {
		case "":
		case "[0-9]+":
			segs[i].digits = true
		case ".*":
			if i != len(parts)-1 {
				panic("router: {" + inner + "} must end " + template)
			}
			segs[i].rest = true
		default:
			panic("router: unknown pattern in " + template)
		}
	}
	return segs
}

// match reports whether path matches p's template, setting its
// parameters' values in r if r is not nil.
func (p *pathRoutes) match(path string, r *http.Request) bool {
	rest, ok := strings.CutPrefix(path, "/")
	if !ok {
		return false
	}
	var vals [maxParams]string
	n := 0
	for i, s := range p.segs {
		if s.rest {
			vals[n] = rest
			rest = ""
			break
		}
		seg, after, more := strings.Cut(rest, "/")
		if more != (i < len(p.segs)-1) {
			return false
		}
		switch {
		case s.name == "":
			if seg != s.lit {
				return false
			}
		case seg == "", s.digits && strings.Trim(seg, "0123456789") != "":
			return false
		default:
			vals[n] = seg
			n++
		}
		rest = after
	}
	if r != nil {
		n = 0
		for _, s := range p.segs {
			if s.name != "" {
				r.SetPathValue(s.name, vals[n])
				n++
			}
		}
	}
	return true
}

// handler returns p's handler for method, or nil.
func (p *pathRoutes) handler(method string) http.Handler {
	if h := p.byMethod[method]; h != nil {
		return h
	}
	return p.any
}

// route returns the handler and template for r, setting r's path values;
// or nil and whether some route has r's path.
func (rt *router) route(r *http.Request, setValues bool) (http.Handler, string, bool) {
	path := r.URL.Path
	if p := rt.exact[path]; p != nil {
		return p.handler(r.Method), p.template, true
	}
	var into *http.Request // where a match sets its path values
	if setValues {
		into = r
	}
	pathMatched := false
	for _, p := range rt.patterns { // each matched once: the method first
		if h := p.handler(r.Method); h == nil {
			pathMatched = pathMatched || p.match(path, nil)
		} else if p.match(path, into) {
			return h, p.template, true
		}
	}
	return nil, "", pathMatched
}

// Match returns the template of the route r would take, if one would.
func (rt *router) Match(r *http.Request) (string, bool) {
	h, tpl, _ := rt.route(r, false)
	return tpl, h != nil
}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, tpl, pathMatched := rt.route(r, true)
	switch {
	case h != nil:
		if rt.matched != nil {
			rt.matched(r, tpl)
		}
		h.ServeHTTP(w, r)
	case pathMatched:
		rt.MethodNotAllowedHandler.ServeHTTP(w, r)
	default:
		rt.NotFoundHandler.ServeHTTP(w, r)
	}
}
