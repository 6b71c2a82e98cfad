package eventjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecode compares Decode with encoding/json on whatever bytes it is
// given: where encoding/json refuses the input as an object, Decode must
// refuse it too; where encoding/json reads an object whose known keys hold
// the types the agent sends, Decode must accept it and agree on every
// field. The hand-written decoder is allowed two differences, both
// deliberate: it refuses nesting deeper than maxDepth, and it keeps the
// bytes of invalid UTF-8 where encoding/json writes U+FFFD, so strings
// are compared only for valid UTF-8 input.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"stream":"stdout","data":"42"}`, `{"missed":3,"message":"m"}`,
		`{"code":-1,"error":false}`, `{"error":"boom"}`, `{"truncated":true,"x":[1,{"y":null}]}`,
		`{"data":"a\u00e9\ud83d\ude00\n\"\\"}`, `{"code":9223372036854775807}`,
		`{"code":9223372036854775808}`, `{"missed":-9223372036854775808}`, ` { "data" : "" } `,
		`{"data":"x","data":"y"}`, `[1]`, `{"a":1,}`, `{"code":01}`, `{"code":1.5}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got Fields
		err := got.Decode(b)
		var obj map[string]json.RawMessage
		if jerr := json.Unmarshal(b, &obj); jerr != nil || obj == nil {
			if err == nil {
				t.Fatalf("Decode accepted %q, which encoding/json refuses as an object (%v)", b, jerr)
			}
			return
		}
		if hasDuplicateKeys(b) {
			return // a later key overrides an earlier one, which Decode may have refused
		}
		want, typed := expected(obj)
		if !typed {
			if err == nil {
				t.Fatalf("Decode accepted %q, whose known keys do not all hold the agent's types", b)
			}
			return
		}
		if err != nil {
			if strings.Contains(err.Error(), "less nesting") {
				return
			}
			t.Fatalf("Decode refused %q, which encoding/json reads: %v", b, err)
		}
		if got.Missed != want.Missed || got.Code != want.Code || got.Truncated != want.Truncated {
			t.Fatalf("%q: missed, code, truncated = %d, %d, %v; want %d, %d, %v",
				b, got.Missed, got.Code, got.Truncated, want.Missed, want.Code, want.Truncated)
		}
		if !utf8.Valid(b) {
			return
		}
		for _, p := range [][2][]byte{{got.Stream, want.Stream}, {got.Data, want.Data},
			{got.Timestamp, want.Timestamp}, {got.Message, want.Message}, {got.Error, want.Error}} {
			if !bytes.Equal(p[0], p[1]) || (p[0] == nil) != (p[1] == nil) {
				t.Fatalf("%q: got %q, want %q", b, p[0], p[1])
			}
		}
	})
}

// expected reads the fields Decode knows from encoding/json's reading of
// an object, and reports whether each holds the type the agent sends (a
// string, or an integer that fits in 64 bits; "error" and "truncated" may
// hold anything).
func expected(obj map[string]json.RawMessage) (Fields, bool) {
	var want Fields
	for key, raw := range obj {
		var err error
		switch key {
		case "stream":
			want.Stream, err = str(raw)
		case "data":
			want.Data, err = str(raw)
		case "timestamp":
			want.Timestamp, err = str(raw)
		case "message":
			want.Message, err = str(raw)
		case "missed":
			want.Missed, err = integer(raw)
		case "code":
			want.Code, err = integer(raw)
		case "error":
			if raw[0] == '"' {
				want.Error, err = str(raw)
			}
		case "truncated":
			want.Truncated = string(raw) == "true"
		}
		if err != nil {
			return want, false
		}
	}
	return want, true
}

// integer reads an integer without fraction or exponent, as the agent
// writes its counts and codes.
func integer(raw json.RawMessage) (int64, error) {
	var n int64
	if bytes.ContainsAny(raw, ".eE") {
		return 0, errors.New("not an integer")
	}
	err := json.Unmarshal(raw, &n)
	return n, err
}

func str(raw json.RawMessage) ([]byte, error) {
	var s string
	err := json.Unmarshal(raw, &s)
	return []byte(s), err
}

// hasDuplicateKeys reports whether the object b holds a top-level key
// twice.
func hasDuplicateKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		key, _ := tok.(string)
		if seen[key] {
			return true
		}
		seen[key] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return false
}
