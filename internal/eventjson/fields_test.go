package eventjson

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sandbox-executor/sandbox-executor/sse"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDecodeMatchesEncodingJSON decodes what the agent sends for tricky
// lines and compares each field with encoding/json's reading of it.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	lines := []string{
		"", "42", "plain text", `quote " and \ backslash`, "tab\tcr\rnl\n",
		"\x00\x01\x1f\x7f", "héllo wörld ✓ 𝄞", "\u2028\u2029", "<html>&amp;</html>",
		"bad \xff utf8 \xc3", "\xe2\x82", strings.Repeat("long ", 10_000),
	}
	var f Fields
	for _, line := range lines {
		data := []byte(`{"stream":"stderr","data":`) // as server/run.go writes it
		data = sse.AppendJSONString(data, []byte(line))
		data = append(data, '}')
		var want struct{ Stream, Data string }
		require.NoError(t, json.Unmarshal(data, &want), "data %q", data)
		require.NoError(t, f.Decode(data), "data %q", data)
		assert.Equal(t, want.Stream, string(f.Stream))
		assert.Equal(t, want.Data, string(f.Data), "line %q", line)
	}
}

// TestDecodeEscapes covers escapes AppendJSONString never writes but JSON
// allows, keys in any order, and unknown keys of every type.
func TestDecodeEscapes(t *testing.T) {
	cases := []string{
		`{"data":"\/\b\f\n\r\t\"\\","stream":"stdout"}`,
		`{"data":"\u00e9\u4e2d\ud834\udd1e","stream":"stdout"}`,
		`{"data":"lone \ud834 high, lone \udd1e low","stream":"x"}`,
		`{"data":"\ud834\u0041","stream":"x"}`,
		` { "timestamp" : "2026-01-02T03:04:05.5Z" , "stream":"stdout", "data":"7", "extra":null, "ok":true } `,
		`{"data":"","stream":""}`,
		`{"new":{"a":[1,-2.5e3,{"b":"\u00e9"}],"c":{}},"data":"d","list":[],"f":0.5,"stream":"s"}`,
		`{"d\u0061ta":"escaped key","stream":"s"}`,
	}
	var f Fields
	for _, c := range cases {
		var want struct{ Stream, Data, Timestamp string }
		require.NoError(t, json.Unmarshal([]byte(c), &want), c)
		require.NoError(t, f.Decode([]byte(c)), c)
		assert.Equal(t, want.Stream, string(f.Stream), c)
		assert.Equal(t, want.Data, string(f.Data), c)
		assert.Equal(t, want.Timestamp, string(f.Timestamp), c)
	}
}

func TestDecodeOtherFields(t *testing.T) {
	var f Fields
	require.NoError(t, f.Decode([]byte(`{"missed":123456,"message":"123456 log lines were dropped"}`)))
	assert.Equal(t, int64(123456), f.Missed)
	assert.Equal(t, "123456 log lines were dropped", string(f.Message))
	assert.Nil(t, f.Data)

	require.NoError(t, f.Decode([]byte(`{"code":-1,"error":true,"truncated":true,"message":"command timed out after 1s"}`)))
	assert.Equal(t, int64(-1), f.Code)
	assert.True(t, f.Truncated)
	assert.Nil(t, f.Error, "error is a boolean in complete")
	assert.Equal(t, int64(0), f.Missed, "fields are reset between decodes")

	require.NoError(t, f.Decode([]byte(`{"code":0,"error":false,"truncated":false}`)))
	assert.False(t, f.Truncated)

	require.NoError(t, f.Decode([]byte(`{"error":"failed to start command: \"x\""}`)))
	assert.Equal(t, `failed to start command: "x"`, string(f.Error))

	require.NoError(t, f.Decode([]byte(`{}`)))
}

func TestDecodeRejectsInvalid(t *testing.T) {
	var f Fields
	for _, c := range []string{
		``, `{`, `{"data"}`, `{"data":"x"`, `{"data":"x",}`, `{"data":"x"} trailing`,
		`{"data":"unterminated}`, `{"data":"bad \q escape"}`, `{"data":"short \u12"}`,
		"{\"data\":\"raw\nnewline\"}", `{"missed":01}`, `{"missed":-}`, `{data:"x"}`, `{"ok":tru}`,
		`{"x":[1,]}`, `{"x":{"a"}}`, `{"x":01}`, `{"x":1.}`, `{"x":1e}`, `{"x":-}`, `{"x":[}`,
		`{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	} {
		assert.Error(t, f.Decode([]byte(c)), "%q", c)
	}
	// Valid JSON with the wrong type under a known key: refused rather
	// than misread.
	for _, c := range []string{`[]`, `"x"`, `{"data":{"nested":1}}`, `{"data":["x"]}`, `{"missed":1.5}`, `{"code":1e3}`, `{"message":null}`} {
		require.True(t, json.Valid([]byte(c)), "case %q is invalid JSON", c)
		assert.Error(t, f.Decode([]byte(c)), "%q", c)
	}
}

func TestParseUint(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "1": 1, "1000000": 1_000_000, "1795241062346407618": 1795241062346407618} {
		got, ok := ParseUint([]byte(in))
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "-1", "1a", " 1", "12345678901234567890"} {
		_, ok := ParseUint([]byte(in))
		assert.False(t, ok, in)
	}
}

func TestPlainBytesTable(t *testing.T) {
	require.Len(t, plainBytes, 256)
	for c := range 256 {
		want := c >= 0x20 && c != '"' && c != '\\'
		assert.Equal(t, want, plainBytes[c] == 1, "byte %#x", c)
	}
}
