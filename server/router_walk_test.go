package server

// walk calls fn with each route's template and methods, nil for a route
// that takes every method: the templates with parameters in the order
// they were first registered, then the exact paths, in no set order. The
// OpenAPI test checks the document against it.
func (rt *router) walk(fn func(template string, methods []string)) {
	each := func(p *pathRoutes) {
		var ms []string
		for m := range p.byMethod {
			ms = append(ms, m)
		}
		if len(ms) > 0 {
			fn(p.template, ms)
		}
		if p.any != nil {
			fn(p.template, nil)
		}
	}
	for _, p := range rt.patterns {
		each(p)
	}
	for _, p := range rt.exact {
		each(p)
	}
}
