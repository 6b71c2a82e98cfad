package mcp

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Schema is a tool's input schema: a JSON Schema 2020-12 object schema
// with properties of simple types. It is small on purpose: Validate checks
// every keyword it can express, so a schema offered to clients never
// promises a check the server does not make.
type Schema struct {
	Properties map[string]Prop
	Required   []string
}

// Prop is one property of a Schema.
type Prop struct {
	Type        string // "string", "integer", "number", "boolean", "object" or "array"
	Description string
	// Minimum and Maximum bound an integer or a number; nil means
	// unbounded.
	Minimum, Maximum *int64
	// Enum, if set, lists the values a string may take.
	Enum []string
	// StringValues makes an object's values strings (a map, e.g. env),
	// and an array's items strings (a list of globs).
	StringValues bool
}

// Int returns a pointer to v, for Prop.Minimum and Prop.Maximum.
func Int(v int64) *int64 { return &v }

// MarshalJSON writes s as a JSON Schema object schema. Unknown properties
// are refused (additionalProperties: false), so a misspelt argument is an
// error the model sees rather than a silent default.
func (s Schema) MarshalJSON() ([]byte, error) {
	props := make(map[string]any, len(s.Properties))
	for name, p := range s.Properties {
		props[name] = p.jsonSchema()
	}
	req := s.Required
	if req == nil {
		req = []string{}
	}
	return json.Marshal(map[string]any{"type": "object", "properties": props, "required": req,
		"additionalProperties": false})
}

func (p Prop) jsonSchema() map[string]any {
	m := map[string]any{"type": p.Type}
	if p.Description != "" {
		m["description"] = p.Description
	}
	if p.Minimum != nil {
		m["minimum"] = *p.Minimum
	}
	if p.Maximum != nil {
		m["maximum"] = *p.Maximum
	}
	if len(p.Enum) > 0 {
		m["enum"] = p.Enum
	}
	switch {
	case p.StringValues && p.Type == "array":
		m["items"] = map[string]string{"type": "string"}
	case p.StringValues:
		m["additionalProperties"] = map[string]string{"type": "string"}
	}
	return m
}

// Validate checks args, a tool call's arguments, against s. The error
// names the first argument at fault, for the model to correct.
func (s Schema) Validate(args map[string]json.RawMessage) error {
	for _, name := range s.Required {
		if v, ok := args[name]; !ok || string(v) == "null" {
			return fmt.Errorf("argument %q is required", name)
		}
	}
	names := make([]string, 0, len(args))
	for name := range args {
		names = append(names, name)
	}
	sort.Strings(names) // the same error for the same call
	for _, name := range names {
		p, ok := s.Properties[name]
		if !ok {
			return fmt.Errorf("unknown argument %q (the tool takes %s)", name, s.names())
		}
		if err := p.check(args[name]); err != nil {
			return fmt.Errorf("argument %q: %w", name, err)
		}
	}
	return nil
}

func (s Schema) names() string {
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func (p Prop) check(raw json.RawMessage) error {
	switch p.Type {
	case "string":
		var v string
		if json.Unmarshal(raw, &v) != nil {
			return fmt.Errorf("must be a string")
		}
		if len(p.Enum) > 0 && !contains(p.Enum, v) {
			return fmt.Errorf("must be one of %s", strings.Join(p.Enum, ", "))
		}
	case "integer", "number":
		var f float64
		if json.Unmarshal(raw, &f) != nil {
			return fmt.Errorf("must be a number")
		}
		if p.Type == "integer" && (f != math.Trunc(f) || math.Abs(f) > 1<<53) {
			return fmt.Errorf("must be an integer")
		}
		if p.Minimum != nil && f < float64(*p.Minimum) {
			return fmt.Errorf("must be at least %d", *p.Minimum)
		}
		if p.Maximum != nil && f > float64(*p.Maximum) {
			return fmt.Errorf("must be at most %d", *p.Maximum)
		}
	case "array":
		var a []json.RawMessage
		if json.Unmarshal(raw, &a) != nil || a == nil {
			return fmt.Errorf("must be an array")
		}
		if p.StringValues {
			for i, v := range a {
				var s string
				if json.Unmarshal(v, &s) != nil {
					return fmt.Errorf("item %d must be a string", i)
				}
			}
		}
	case "boolean":
		var v bool
		if json.Unmarshal(raw, &v) != nil {
			return fmt.Errorf("must be true or false")
		}
	case "object":
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m == nil {
			return fmt.Errorf("must be an object")
		}
		if p.StringValues {
			for k, v := range m {
				var s string
				if json.Unmarshal(v, &s) != nil {
					return fmt.Errorf("%q must be a string", k)
				}
			}
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
