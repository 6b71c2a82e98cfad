package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/santhosh-tekuri/jsonschema/v6"

	sandboxexecutor "github.com/sandbox-executor/sandbox-executor"
)

// openAPIDoc is openapi.yaml, loaded, validated and compiled for checking.
type openAPIDoc struct {
	doc    *openapi3.T
	router routers.Router // matches paths without the servers' hosts
	// schemas holds the compiled schemas of the event payloads the
	// document names in x-sse-events, and of Error, by their $ref.
	// kin-openapi compiles a 3.1 schema anew at every validation, which
	// costs a quarter of a millisecond: too much for every event of a
	// 20,000-line stream.
	schemas map[string]*jsonschema.Schema
}

const errorSchemaRef = "#/components/schemas/Error"

// loadOpenAPIDoc loads the document once per test binary.
var loadOpenAPIDoc = sync.OnceValues(func() (*openAPIDoc, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData([]byte(sandboxexecutor.OpenAPI()))
	if err != nil {
		return nil, fmt.Errorf("loading openapi.yaml: %w", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("openapi.yaml is OpenAPI %s, not 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("openapi.yaml is not valid: %w", err)
	}
	// The servers name a host; the tests' requests go to 127.0.0.1 on
	// some port, so route by path alone.
	routed := *doc
	routed.Servers = openapi3.Servers{{URL: "/"}}
	// A path parameter that takes the rest of the path, slashes and all
	// (x-rest-of-path names it), is one that OpenAPI cannot write: the
	// router gets it as gorilla/mux writes it.
	routed.Paths = openapi3.NewPaths()
	for path, item := range doc.Paths.Map() {
		if name, ok := item.Extensions["x-rest-of-path"].(string); ok {
			path = strings.Replace(path, "{"+name+"}", "{"+name+":.*}", 1)
		}
		routed.Paths.Set(path, item)
	}
	router, err := gorillamux.NewRouter(&routed)
	if err != nil {
		return nil, fmt.Errorf("routing openapi.yaml: %w", err)
	}
	d := &openAPIDoc{doc: doc, router: router}
	if d.schemas, err = compileSchemas(doc); err != nil {
		return nil, err
	}
	return d, nil
})

// compileSchemas compiles, with JSON Schema 2020-12 as OpenAPI 3.1 has it,
// the Error schema and every schema an x-sse-events map refers to.
func compileSchemas(doc *openapi3.T) (map[string]*jsonschema.Schema, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	whole, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	const url = "mem:///openapi.json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(url, whole); err != nil {
		return nil, err
	}
	schemas := map[string]*jsonschema.Schema{}
	refs := []string{errorSchemaRef}
	for _, mt := range eventStreamMediaTypes(doc) {
		events, _, err := sseEvents(mt)
		if err != nil {
			return nil, err
		}
		for _, ref := range events {
			refs = append(refs, ref)
		}
	}
	for _, ref := range refs {
		if schemas[ref] != nil {
			continue
		}
		if schemas[ref], err = c.Compile(url + ref); err != nil {
			return nil, fmt.Errorf("compiling %s: %w", ref, err)
		}
	}
	return schemas, nil
}

// eventStreamMediaTypes returns every text/event-stream media type of the
// document's replies.
func eventStreamMediaTypes(doc *openapi3.T) []*openapi3.MediaType {
	var mts []*openapi3.MediaType
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, resp := range op.Responses.Map() {
				// Exactly: a reply of any media type ("*/*", a preview's)
				// is not an event stream of the agent's.
				if mt := resp.Value.Content["text/event-stream"]; mt != nil {
					mts = append(mts, mt)
				}
			}
		}
	}
	return mts
}

// sseEvents reads a media type's x-sse-events (event name → $ref of the
// schema of its data) and x-sse-events-with-id (the names of the events
// that carry an id: line).
func sseEvents(mt *openapi3.MediaType) (events map[string]string, withID map[string]bool, err error) {
	m, ok := mt.Extensions["x-sse-events"].(map[string]any)
	if !ok || len(m) == 0 {
		return nil, nil, errors.New("an event-stream reply without x-sse-events")
	}
	events = map[string]string{}
	for name, v := range m {
		ref, _ := v.(map[string]any)["$ref"].(string)
		if !strings.HasPrefix(ref, "#/components/schemas/") {
			return nil, nil, fmt.Errorf("x-sse-events: event %q is not a $ref to a schema of components", name)
		}
		events[name] = ref
	}
	ids, ok := mt.Extensions["x-sse-events-with-id"].([]any)
	if !ok {
		return nil, nil, errors.New("an event-stream reply without x-sse-events-with-id")
	}
	withID = map[string]bool{}
	for _, v := range ids {
		name, _ := v.(string)
		if events[name] == "" {
			return nil, nil, fmt.Errorf("x-sse-events-with-id names %q, which x-sse-events does not", v)
		}
		withID[name] = true
	}
	return events, withID, nil
}
