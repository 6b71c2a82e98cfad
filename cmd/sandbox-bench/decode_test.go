package main

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
	var f eventFields
	for _, line := range lines {
		// As server/run.go writes an output event's data.
		data := []byte(`{"stream":"stderr","data":`)
		data = sse.AppendJSONString(data, []byte(line))
		data = append(data, '}')
		var want struct{ Stream, Data string }
		require.NoError(t, json.Unmarshal(data, &want), "data %q", data)
		require.NoError(t, f.decode(data), "data %q", data)
		assert.Equal(t, want.Stream, string(f.Stream))
		assert.Equal(t, want.Data, string(f.Data), "line %q", line)
	}
}

// TestDecodeEscapes covers escapes AppendJSONString never writes but JSON
// allows, and keys in any order with other value types.
func TestDecodeEscapes(t *testing.T) {
	cases := []string{
		`{"data":"\/\b\f\n\r\t\"\\","stream":"stdout"}`,
		`{"data":"\u00e9\u4e2d\ud834\udd1e","stream":"stdout"}`, // é, 中 and a surrogate pair
		`{"data":"lone \ud834 high, lone \udd1e low","stream":"x"}`,
		`{"data":"\ud834\u0041","stream":"x"}`, // a high surrogate followed by a non-surrogate
		` { "timestamp" : "2026-01-02T03:04:05.5Z" , "stream":"stdout", "data":"7", "extra":null, "ok":true } `,
		`{"data":"","stream":""}`,
	}
	var f eventFields
	for _, c := range cases {
		var want struct{ Stream, Data, Timestamp string }
		require.NoError(t, json.Unmarshal([]byte(c), &want), c)
		require.NoError(t, f.decode([]byte(c)), c)
		assert.Equal(t, want.Stream, string(f.Stream), c)
		assert.Equal(t, want.Data, string(f.Data), c)
		assert.Equal(t, want.Timestamp, string(f.Timestamp), c)
	}
}

func TestDecodeNumbers(t *testing.T) {
	var f eventFields
	require.NoError(t, f.decode([]byte(`{"missed":123456,"message":"123456 log lines were dropped"}`)))
	assert.Equal(t, int64(123456), f.Missed)
	assert.Nil(t, f.Data)

	require.NoError(t, f.decode([]byte(`{"code":-1,"error":true}`)))
	assert.Equal(t, int64(-1), f.Code)
	assert.Equal(t, int64(0), f.Missed, "fields are reset between decodes")

	require.NoError(t, f.decode([]byte(`{}`)))
}

func TestDecodeRejectsInvalid(t *testing.T) {
	var f eventFields
	for _, c := range []string{
		``, `{`, `{"data"}`, `{"data":"x"`, `{"data":"x",}`, `{"data":"x"} trailing`,
		`{"data":"unterminated}`, `{"data":"bad \q escape"}`, `{"data":"short \u12"}`,
		"{\"data\":\"raw\nnewline\"}", `{"missed":01}`, `{"missed":-}`, `{data:"x"}`, `{"ok":tru}`,
	} {
		require.False(t, json.Valid([]byte(c)), "case %q is valid JSON", c)
		assert.Error(t, f.decode([]byte(c)), "%q", c)
	}
	// Valid JSON that no event of the agent is: refused rather than misread.
	for _, c := range []string{`[]`, `"x"`, `{"data":{"nested":1}}`, `{"data":["x"]}`, `{"missed":1.5}`, `{"code":1e3}`} {
		require.True(t, json.Valid([]byte(c)), "case %q is invalid JSON", c)
		assert.Error(t, f.decode([]byte(c)), "%q", c)
	}
}

func TestParseUint(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "1": 1, "1000000": 1_000_000, "1795241062346407618": 1795241062346407618} {
		got, ok := parseUint([]byte(in))
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "-1", "1a", " 1", "12345678901234567890"} {
		_, ok := parseUint([]byte(in))
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
