package server

import (
	"bytes"
	"encoding/base64"
	"image/png"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/contexts"
)

// debianFirst looks an interpreter up in /usr/bin first: the python3 that
// Debian's python3-matplotlib is for, where pyenv's would come first on
// this machine's PATH.
func debianFirst(name string) (string, error) {
	if p := "/usr/bin/" + name; fileExists(p) {
		return p, nil
	}
	return exec.LookPath(name)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestContextMatplotlib(t *testing.T) {
	py, err := debianFirst("python3")
	if err != nil {
		t.Skip("no python3")
	}
	if err := exec.Command(py, "-c", "import matplotlib").Run(); err != nil {
		t.Skipf("%s cannot import matplotlib (apt-get install python3-matplotlib): %v", py, err)
	}
	ts := newContextServer(t, contexts.Options{LookPath: debianFirst})
	id := createContext(t, ts, map[string]any{"language": "python"})

	for _, code := range []string{
		"import matplotlib.pyplot as plt\nplt.plot([1,2,3]); plt.show()",
		"plt.figure(); plt.plot([3,2,1])", // a figure left open at the end of the call
	} {
		evs := runCode(t, ts, map[string]any{"context": id, "code": code})
		assert.Equal(t, "ok", complete(t, evs)["status"], code)
		ev, ok := findEvent(evs, "display")
		require.True(t, ok, "a display event for %q", code)
		data := ev.data["data"].(map[string]any)
		assert.Contains(t, data["text/plain"], "Figure")
		raw, err := base64.StdEncoding.DecodeString(data["image/png"].(string))
		require.NoError(t, err)
		img, err := png.Decode(bytes.NewReader(raw))
		require.NoError(t, err, "image/png is a valid PNG")
		assert.Greater(t, img.Bounds().Dx(), 100)
	}
	// Nothing left open: no figure is shown twice.
	evs := runCode(t, ts, map[string]any{"context": id, "code": "1"})
	_, ok := findEvent(evs, "display")
	assert.False(t, ok)
}

func TestContextRichOutput(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})
	code := `class Rich:
    def __repr__(self): return "Rich()"
    def _repr_html_(self): return "<b>rich</b>"
    def _repr_json_(self): return {"a": [1, 2]}
    def _repr_png_(self): return b"\x89PNG fake"
display(Rich())
Rich()`
	evs := runCode(t, ts, map[string]any{"context": id, "code": code})
	assert.Equal(t, "ok", complete(t, evs)["status"])
	for _, name := range []string{"display", "result"} {
		ev, ok := findEvent(evs, name)
		require.True(t, ok, name)
		data := ev.data["data"].(map[string]any)
		assert.Equal(t, "Rich()", data["text/plain"])
		assert.Equal(t, "<b>rich</b>", data["text/html"])
		assert.Equal(t, map[string]any{"a": []any{float64(1), float64(2)}}, data["application/json"])
		assert.Equal(t, base64.StdEncoding.EncodeToString([]byte("\x89PNG fake")), data["image/png"])
	}
}

// An output past the cap loses its largest types and says so.
func TestContextOutputCap(t *testing.T) {
	ts := newContextServer(t, contexts.Options{MaxOutput: 1 << 10})
	id := createContext(t, ts, map[string]any{"language": "python"})
	code := `class Big:
    def __repr__(self): return "Big()"
    def _repr_html_(self): return "x" * 5000
Big()`
	evs := runCode(t, ts, map[string]any{"context": id, "code": code})
	ev, ok := findEvent(evs, "result")
	require.True(t, ok)
	assert.Equal(t, true, ev.data["truncated"])
	data := ev.data["data"].(map[string]any)
	assert.Equal(t, "Big()", data["text/plain"])
	assert.NotContains(t, data, "text/html")
}

// The worker's matplotlib backend is the context's own: a child process
// of the code imports matplotlib with its own default, and an MPLBACKEND
// of the context's env wins in the context.
func TestContextMatplotlibBackendStaysInTheWorker(t *testing.T) {
	py, err := debianFirst("python3")
	if err != nil {
		t.Skip("no python3")
	}
	if err := exec.Command(py, "-c", "import matplotlib").Run(); err != nil {
		t.Skipf("%s cannot import matplotlib (apt-get install python3-matplotlib): %v", py, err)
	}
	ts := newContextServer(t, contexts.Options{LookPath: debianFirst})
	id := createContext(t, ts, map[string]any{"language": "python"})
	evs := runCode(t, ts, map[string]any{"context": id, "code": `import os, subprocess, sys
child = subprocess.run([sys.executable, "-c", "import os, matplotlib.pyplot as plt; print(os.environ.get('MPLBACKEND'), plt.get_backend())"],
                       capture_output=True, text=True)
import matplotlib
child.returncode, child.stdout.strip(), child.stderr[-200:], os.environ.get("MPLBACKEND"), matplotlib.get_backend()`})
	assert.Equal(t, "(0, 'None agg', '', None, 'module://_sandbox_mpl')", codeResult(t, evs))

	id = createContext(t, ts, map[string]any{"language": "python", "env": map[string]string{"MPLBACKEND": "svg"}})
	evs = runCode(t, ts, map[string]any{"context": id, "code": "import matplotlib\nmatplotlib.get_backend()"})
	assert.Equal(t, "'svg'", codeResult(t, evs))
}
