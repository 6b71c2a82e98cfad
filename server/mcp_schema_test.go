package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// toolExamples are arguments each tool takes: every tool must have one,
// so that a new tool cannot escape TestMCPToolSchemas.
var toolExamples = map[string]string{
	"exec":          `{"cmd":"true","cwd":"/","env":{"A":"1"},"session":"s","timeout":5,"yield_ms":100,"max_output_bytes":1000}`,
	"exec_poll":     `{"process_id":"p","cursor":0,"input":"y\n","close_stdin":true,"yield_ms":100}`,
	"read_file":     `{"path":"/etc/hostname","offset":1,"limit":10}`,
	"write_file":    `{"path":"/tmp/x","content":"x"}`,
	"edit_file":     `{"path":"/tmp/x","old":"a","new":"b","replace_all":true,"expected_count":2}`,
	"apply_patch":   `{"patch":"*** Begin Patch\n*** End Patch","cwd":"/tmp"}`,
	"list_dir":      `{"path":"/","depth":2}`,
	"grep":          `{"pattern":"a.c","path":"/","fixed":false,"ignore_case":true,"include":["*.go"],"exclude":["vendor"],"exclude_defaults":false,"context":2,"max_results":10,"max_file_bytes":1000,"hidden":true,"gitignore":false,"timeout":1.5,"cursor":"c"}`,
	"find_files":    `{"glob":"**/*.go","path":"/","type":"any","max_results":10,"hidden":true,"gitignore":false,"exclude":["x"],"exclude_defaults":true,"timeout":2,"cursor":"c"}`,
	"process_list":  `{}`,
	"process_kill":  `{"process_id":"p","signal":"TERM"}`,
	"process_logs":  `{"process_id":"p","since":3,"max_output_bytes":100}`,
	"run_code":      `{"code":"1+1","language":"python","context":"c","timeout":2.5,"max_output_bytes":100}`,
	"preview_url":   `{"port":3000}`,
	"wait_for_port": `{"port":3000,"mode":"http","path":"/health","status":"200-299","timeout":0.5,"process_id":"p"}`,
}

// Every tool's inputSchema (and outputSchema) is a JSON Schema 2020-12
// object schema that compiles, whose required names are properties, that
// accepts the tool's example and refuses an unknown argument; and the
// server's own check agrees with the schema on both.
func TestMCPToolSchemas(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	_, _, m := mcpPost(t, ts, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var names []string
	for _, raw := range result(t, m)["tools"].([]any) {
		tool := raw.(map[string]any)
		name := tool["name"].(string)
		names = append(names, name)
		in := tool["inputSchema"].(map[string]any)
		assert.Equal(t, "object", in["type"], name)
		props, ok := in["properties"].(map[string]any)
		require.True(t, ok, "%s has properties", name)
		for _, r := range in["required"].([]any) {
			assert.Contains(t, props, r, "%s: required %v is a property", name, r)
		}
		schema := compileToolSchema(t, name, in)
		example, ok := toolExamples[name]
		require.True(t, ok, "toolExamples has no example for %s", name)
		assert.NoError(t, schema.Validate(decodeAny(t, example)), "%s: its example", name)
		bogus := decodeAny(t, example).(map[string]any)
		bogus["no_such_argument"] = 1
		assert.Error(t, schema.Validate(bogus), name)
		if out, ok := tool["outputSchema"].(map[string]any); ok {
			compileToolSchema(t, name+" output", out)
		}
		// The server's own check agrees: the example with an unknown
		// argument is refused before the tool runs.
		args, err := json.Marshal(bogus)
		require.NoError(t, err)
		_, _, m := mcpPost(t, ts, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, name, args))
		assert.Equal(t, true, result(t, m)["isError"], name)
		assert.Contains(t, fmt.Sprint(result(t, m)["content"]), "no_such_argument", name)
	}
	assert.Equal(t, mcpToolNames(), names, "every tool is offered, in the order -mcp-tools knows them")
	assert.Len(t, toolExamples, len(names))
}

func compileToolSchema(t *testing.T, name string, schema map[string]any) *jsonschema.Schema {
	t.Helper()
	b, err := json.Marshal(schema)
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := "mem:///" + name + ".json"
	require.NoError(t, c.AddResource(url, doc))
	s, err := c.Compile(url)
	require.NoError(t, err, "%s: the schema compiles as JSON Schema 2020-12", name)
	return s
}

func decodeAny(t *testing.T, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(s)))
	require.NoError(t, err)
	return v
}

// -mcp-tools knows every tool, the newer ones included, and limits them.
func TestMCPToolsLimitKnowsEveryTool(t *testing.T) {
	require.NoError(t, CheckMCPTools(mcpToolNames()))
	ts, _ := newTestServer(t, testServer{cfg: Config{MCP: MCPConfig{Tools: []string{"wait_for_port", "grep", "run_code"}}}})
	_, _, m := mcpPost(t, ts, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var names []string
	for _, tool := range result(t, m)["tools"].([]any) {
		names = append(names, tool.(map[string]any)["name"].(string))
	}
	assert.Equal(t, []string{"grep", "run_code", "wait_for_port"}, names, "in the tools' own order")
	_, _, m = mcpPost(t, ts, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"edit_file","arguments":{"path":"/tmp/x","old":"a","new":"b"}}}`)
	assert.EqualValues(t, -32602, rpcCode(m))
}
