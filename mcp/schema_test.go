package mcp

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSchemaValidate(t *testing.T) {
	s := Schema{Required: []string{"path"}, Properties: map[string]Prop{
		"path":  {Type: "string"},
		"depth": {Type: "integer", Minimum: Int(1), Maximum: Int(5)},
		"all":   {Type: "boolean"},
		"env":   {Type: "object", StringValues: true},
		"sig":   {Type: "string", Enum: []string{"TERM", "KILL"}},
		"secs":  {Type: "number", Minimum: Int(0), Maximum: Int(60)},
		"globs": {Type: "array", StringValues: true},
	}}
	for _, c := range []struct {
		args, err string
	}{
		{`{"path":"/a"}`, ""},
		{`{"path":"/a","depth":5,"all":true,"env":{"A":"1"},"sig":"TERM"}`, ""},
		{`{}`, `argument "path" is required`},
		{`{"path":null}`, `argument "path" is required`},
		{`{"path":1}`, `argument "path": must be a string`},
		{`{"path":"/a","depth":0}`, `argument "depth": must be at least 1`},
		{`{"path":"/a","depth":6}`, `argument "depth": must be at most 5`},
		{`{"path":"/a","depth":1.5}`, `argument "depth": must be an integer`},
		{`{"path":"/a","all":"yes"}`, `argument "all": must be true or false`},
		{`{"path":"/a","env":{"A":1}}`, `argument "env": "A" must be a string`},
		{`{"path":"/a","env":[]}`, `argument "env": must be an object`},
		{`{"path":"/a","sig":"HUP"}`, `argument "sig": must be one of TERM, KILL`},
		{`{"path":"/a","secs":1.5,"globs":["*.go",""]}`, ""},
		{`{"path":"/a","depth":"2"}`, `argument "depth": must be a number`},
		{`{"path":"/a","secs":-0.5}`, `argument "secs": must be at least 0`},
		{`{"path":"/a","secs":60.5}`, `argument "secs": must be at most 60`},
		{`{"path":"/a","globs":"*.go"}`, `argument "globs": must be an array`},
		{`{"path":"/a","globs":["*.go",1]}`, `argument "globs": item 1 must be a string`},
		{`{"path":"/a","bogus":1}`, `unknown argument "bogus" (the tool takes all, depth, env, globs, path, secs, sig)`},
	} {
		var args map[string]json.RawMessage
		assert.NoError(t, json.Unmarshal([]byte(c.args), &args))
		err := s.Validate(args)
		if c.err == "" {
			assert.NoError(t, err, c.args)
		} else {
			assert.EqualError(t, err, c.err, c.args)
		}
	}
}

// The schema offered is the JSON Schema object schema Validate checks.
func TestSchemaJSON(t *testing.T) {
	b, err := json.Marshal(Schema{Required: []string{"port"}, Properties: map[string]Prop{
		"port": {Type: "integer", Minimum: Int(1), Maximum: Int(65535)}}})
	assert.NoError(t, err)
	assert.JSONEq(t, `{"type":"object","properties":{"port":{"type":"integer","minimum":1,"maximum":65535}},
		"required":["port"],"additionalProperties":false}`, string(b))
	b, err = json.Marshal(Schema{Properties: map[string]Prop{
		"globs": {Type: "array", StringValues: true}, "secs": {Type: "number"}}})
	assert.NoError(t, err)
	assert.JSONEq(t, `{"type":"object","properties":{"globs":{"type":"array","items":{"type":"string"}},
		"secs":{"type":"number"}},"required":[],"additionalProperties":false}`, string(b))
	b, err = json.Marshal(Schema{})
	assert.NoError(t, err)
	assert.JSONEq(t, `{"type":"object","properties":{},"required":[],"additionalProperties":false}`, string(b))
}
